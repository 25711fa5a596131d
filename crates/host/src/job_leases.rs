//! Several servers on one database: each keeps the jobs it runs, and fails the
//! builds of a server that died only once that server's lease has run out.
//!
//! A server claims a job under its id (`Config::server_id`) with a lease of
//! `Config::job_lease`, and this keeper renews every lease the server holds in
//! one statement, four times per lease. Each round it also looks for running
//! builds of *other* servers whose lease has expired by this server's clock.
//! That is not enough to fail a build: clocks can jump or disagree (tests move
//! them; so can an operator or a bad NTP), so a build is salvaged only when its
//! lease has stayed exactly the same for [`UNCHANGED_ROUNDS`] of this server's
//! rounds, more than a whole lease, which a living holder, renewing four times
//! per lease, never leaves it, whatever the clocks say. A build whose plan
//! was never judged goes back to the queue (`Store::requeue_unjudged_job`:
//! nothing of it can have been applied, so another provisioner runs it);
//! any other is salvaged: `Store::salvage_build` fails the build in one
//! transaction only if its
//! lease is still the one seen, with a message naming the server, drops its
//! saved plan (a confirmed plan is never applied twice) and keeps the state
//! stored last; the holder, if it ever starts again on its data dir, finds its
//! work dir and stores a newer state from it if no newer build has run since
//! (`recovery.rs`).
//!
//! The builds a server held itself are taken back at its start by
//! `recovery.rs` (`running_builds_of`), never by another server.
//!
//! A queued job wakes an idle worker of this server at once, and, on
//! PostgreSQL, every other server's through `NOTIFY` ([`announcements`]);
//! workers also look at the queue every 2 s, for what a lost notification
//! would miss.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use abode_runner::{LogLevel, LogStage};
use abode_store::{BuildStatus, ExpiredJobLease};
use tokio::sync::watch;

use crate::room::Host;

/// How many of this server's rounds (a quarter of a lease each) another
/// server's expired lease must stay unchanged before its build is failed:
/// more than a lease, so that its holder had four chances to renew it.
const UNCHANGED_ROUNDS: u32 = 5;

/// How long a dead server's provisioners stay listed after their last
/// heartbeat.
const FORGET_PROVISIONERS_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The keeper's loop: renew this server's leases, salvage expired ones, and
/// tell that `workers` (this server's provisioners) are alive; at shutdown
/// their rows go.
pub(crate) async fn keeper(host: Host, workers: Vec<String>, mut shutdown: watch::Receiver<bool>) {
    let lease = host.inner.config.job_lease;
    let round = (lease / 4).max(Duration::from_millis(100));
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    let mut seen_expired: HashMap<String, (i64, u32)> = HashMap::new();
    let mut told_low_on_disk: HashSet<String> = HashSet::new();
    loop {
        if *shutdown.borrow() {
            break;
        }
        let server = &host.inner.config.server_id;
        host.beat_server_identity().await;
        host.build_log().flush().await;
        host.check_free_disk(&mut told_low_on_disk).await;
        host.release_abandoned_locks().await;
        if let Err(error) = host.inner.store.renew_job_leases(server, lease_ms).await {
            tracing::error!(%error, "cannot renew this server's job leases");
        }
        if let Err(error) = host
            .inner
            .store
            .renew_preview_leases(server, lease_ms)
            .await
        {
            tracing::error!(%error, "cannot renew this server's preview leases");
        }
        let forget_before = host.now_ms().saturating_sub(
            i64::try_from(FORGET_PROVISIONERS_AFTER.as_millis()).unwrap_or(i64::MAX),
        );
        if let Err(error) = host
            .inner
            .store
            .beat_provisioners(
                &abode_store::ProvisionerBeat {
                    server_id: server,
                    host: host.host_id(),
                    kind: abode_store::ProvisionerKind::Embedded,
                    tags: &abode_control::tags::tags_json(&host.inner.config.provisioner_tags),
                    version: env!("CARGO_PKG_VERSION"),
                },
                &workers,
                forget_before,
            )
            .await
        {
            tracing::error!(%error, "cannot record this server's provisioners' heartbeat");
        }
        host.tell_absent_hosts().await;
        match host.inner.store.expired_job_leases(server).await {
            Ok(expired) => {
                let (salvage, still) = unchanged_since_last_round(&seen_expired, expired);
                seen_expired = still;
                for lease in salvage {
                    host.salvage_build(&lease).await;
                }
            }
            Err(error) => tracing::error!(%error, "cannot read expired job leases"),
        }
        host.background_pass(abode_metrics::PASS_KEEPER);
        tokio::select! {
            _ = tokio::time::sleep(round) => {}
            _ = shutdown.changed() => {}
        }
    }
    if let Err(error) = host
        .inner
        .store
        .forget_provisioners(&host.inner.config.server_id)
        .await
    {
        tracing::warn!(%error, "cannot remove this server's provisioners from the list");
    }
    host.forget_server_identity().await;
}

/// Splits this round's expired leases into those to salvage (seen with the
/// same expiry for [`UNCHANGED_ROUNDS`] rounds: nobody renewed them) and the
/// rest, remembered with how many rounds they have stayed the same.
fn unchanged_since_last_round(
    previous: &HashMap<String, (i64, u32)>,
    expired: Vec<ExpiredJobLease>,
) -> (Vec<ExpiredJobLease>, HashMap<String, (i64, u32)>) {
    let mut salvage = Vec::new();
    let mut remembered = HashMap::new();
    for lease in expired {
        let rounds = match previous.get(&lease.build_id) {
            Some((expires_at, rounds)) if *expires_at == lease.expires_at => rounds + 1,
            _ => 1,
        };
        if rounds >= UNCHANGED_ROUNDS {
            salvage.push(lease);
        } else {
            remembered.insert(lease.build_id.clone(), (lease.expires_at, rounds));
        }
    }
    (salvage, remembered)
}

/// Wakes an idle worker of this server whenever any server announces a
/// queued job (PostgreSQL only; on SQLite there is one server).
pub(crate) async fn announcements(host: Host, mut shutdown: watch::Receiver<bool>) {
    let mut failures: u32 = 0;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let subscribed = host.inner.store.job_announcements().await;
        let mut announcements = match subscribed {
            Ok(Some(announcements)) => announcements,
            Ok(None) => return,
            Err(error) => {
                failures = failures.saturating_add(1);
                tracing::warn!(%error, "cannot listen for jobs queued by other servers; retrying");
                let backoff = Duration::from_secs(u64::from(failures.min(30)));
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => continue,
                    _ = shutdown.changed() => return,
                }
            }
        };
        failures = 0;
        loop {
            tokio::select! {
                announced = announcements.next() => match announced {
                    Ok(()) => host.jobs().wake_one(),
                    Err(error) => {
                        tracing::warn!(%error, "lost the job announcements; listening again");
                        break;
                    }
                },
                _ = shutdown.changed() => return,
            }
        }
    }
}

impl Host {
    /// Fails a running build whose server stopped renewing its lease.
    async fn salvage_build(&self, lease: &ExpiredJobLease) {
        // Never judged, nothing of it was applied: another provisioner
        // runs it, instead of a developer finding it failed.
        match self.inner.store.requeue_unjudged_job(lease).await {
            Ok(true) => {
                let message = format!(
                    "{} stopped renewing its lease before this build's plan was judged; nothing \
                     was applied, and the build waits for another provisioner",
                    abode_control::holders::describe_holder(&lease.holder)
                );
                self.build_log()
                    .note(&lease.build_id, &LogStage::SETUP, LogLevel::Warn, &message)
                    .await;
                self.jobs().wake_all();
                self.build_log().written();
                tracing::warn!(build = %lease.build_id, holder = %lease.holder, "requeued a build whose holder stopped renewing its lease before its plan was judged");
                return;
            }
            Ok(false) => {}
            Err(error) => {
                tracing::error!(build = %lease.build_id, %error, "cannot requeue a build whose holder's lease expired");
                return;
            }
        }
        let message = format!(
            "{} running this build stopped renewing its lease (it ran out at {}); \
             the build is failed, the state stored last is kept, and a newer state from its \
             work dir is stored if it starts again",
            abode_control::holders::describe_holder(&lease.holder),
            abode_control::times::utc_text(lease.expires_at),
        );
        let build_id = &lease.build_id;
        let notices = self
            .notifications()
            .end_notices_of(build_id, BuildStatus::Failed, Some(&message))
            .await;
        match self
            .inner
            .store
            .salvage_build(lease, &message, &notices)
            .await
        {
            // Renewed, claimed again or ended since it was seen, or another
            // server salvaged it first.
            Ok(false) => {}
            Ok(true) => {
                self.build_log()
                    .note(build_id, &LogStage::CLEANUP, LogLevel::Error, &message)
                    .await;
                if let Ok(build) = self.inner.store.build_by_id(build_id).await {
                    self.audit_system(
                        "build.salvage",
                        &build,
                        Some(format!("build={} server={}", build.number, lease.holder)),
                    )
                    .await;
                }
                self.build_log().written();
                tracing::warn!(build = %build_id, holder = %lease.holder, "salvaged a build whose server stopped renewing its lease");
            }
            Err(error) => {
                tracing::error!(build = %build_id, %error, "cannot fail a build whose server's lease expired")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(build_id: &str, expires_at: i64) -> ExpiredJobLease {
        ExpiredJobLease {
            build_id: build_id.into(),
            holder: "other".into(),
            expires_at,
        }
    }

    /// Build ids with their lease's expiry.
    type Leases = &'static [(&'static str, i64)];

    #[test]
    fn only_leases_unchanged_for_enough_rounds_are_salvaged() {
        // Each round's expired leases (build, expiry) -> salvaged that round.
        let rounds: [(Leases, &[&str]); 7] = [
            (&[("a", 10), ("b", 10)], &[]),
            (&[("a", 10), ("b", 10)], &[]),
            // Renewed in between (a clock ahead made it look expired): anew.
            (&[("a", 10), ("b", 20)], &[]),
            (&[("a", 10), ("b", 20)], &[]),
            (&[("a", 10), ("b", 20)], &["a"]),
            // Gone from the list (ended, or renewed past the clock): forgotten.
            (&[], &[]),
            (&[("b", 20)], &[]),
        ];
        let mut seen = HashMap::new();
        for (number, (expired, expected)) in rounds.into_iter().enumerate() {
            let expired = expired.iter().map(|(id, at)| lease(id, *at)).collect();
            let (salvage, remembered) = unchanged_since_last_round(&seen, expired);
            let salvaged: Vec<&str> = salvage.iter().map(|l| l.build_id.as_str()).collect();
            assert_eq!(salvaged, expected, "round {number}");
            seen = remembered;
        }
    }
}
