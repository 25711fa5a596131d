//! Jobs handed to external provisioner daemons (`abode provisioner start`).
//!
//! A daemon authenticates with a provisioner key (`provisioner_keys.rs`) and
//! offers that key's tags. It claims a job with the same claim as an
//! embedded worker (people's jobs first, `SKIP LOCKED`, the tag rule), under
//! a lease held by [`daemon_holder`], which it renews with every heartbeat.
//! Every later call names the build and is answered only while that daemon
//! still holds the build's lease: a daemon whose lease ran out (and whose
//! build another server failed) is told so and stops. What the daemon
//! reports goes through the same [`ServerJob`] as an embedded worker's run,
//! so the server judges every plan and keeps only successor states.
//!
//! A daemon dies like a server: its lease stops being renewed and any
//! server's keeper fails the build after it (`job_leases.rs`), keeping the
//! state the daemon uploaded last.

use std::time::Duration;

use abode_protocol::{LogLineWire, Outcome};
use abode_runner::{JobInputs, JobKind, LogLevel, LogSink, LogStage, StateKept, Verdict};
use abode_store::{BuildStatus, ProvisionerKind};

use crate::provisioner::run_kind;
use crate::provisioner::ServerJob;
use crate::room::Host;
use crate::states;
use abode_control::holders::{describe_holder, DAEMON_HOLDER_PREFIX};
use abode_control::ControlError;

/// The longest a daemon's acquire waits for a job before it is answered
/// with none (it asks again at once).
pub const MAX_ACQUIRE_WAIT: Duration = Duration::from_secs(20);

/// How often a waiting acquire looks at the queue without a wake-up.
const ACQUIRE_POLL: Duration = Duration::from_secs(1);

/// A daemon as it introduces itself on each call.
#[derive(Debug, Clone)]
pub struct DaemonCaller {
    /// The SHA-256 of its key: a key deleted during a long-poll claims
    /// nothing more.
    pub key_hash: String,
    /// The key it authenticated with: its id, which names the daemon's
    /// leases (a key made again under a deleted key's name is another key
    /// and inherits none of its builds)...
    pub key_id: String,
    /// ...and its name, for people.
    pub key_name: String,
    /// The key's tags, which are the daemon's.
    pub tags: Vec<String>,
    /// The daemon's own id (stable across its restarts on one data dir),
    /// which is also its host: the volumes and processes its builds make
    /// are on its machine (`placement.rs`).
    pub daemon_id: String,
    /// The slot calling: a job is its claim's slot's (see
    /// `Store::claimed_job_kind`).
    pub slot: String,
}

/// The lease holder of a daemon's jobs, `provisioner:KEY_ID/KEY/ID`: its
/// key's id (what the lease is held by: a key is its id, never its name,
/// which a deleted key leaves free), its key's name and its own id (what
/// people read, [`describe_holder`]).
pub fn daemon_holder(caller: &DaemonCaller) -> String {
    format!(
        "{}{}/{}",
        key_holders(&caller.key_id),
        caller.key_name,
        caller.daemon_id
    )
}

/// The start of the lease holder of every daemon of the key `key_id`.
fn key_holders(key_id: &str) -> String {
    format!("{DAEMON_HOLDER_PREFIX}{key_id}/")
}

/// What a daemon's call about a build needs, checked before its body is
/// read ([`Host::daemon_may_call_about`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaemonNeed {
    /// The build's job is claimed by a daemon of the key now (a log, a
    /// verdict, an end, a heartbeat).
    Holding,
    /// A daemon of the key claimed it last, whether or not the build still
    /// runs (a state a run left behind).
    Held,
}

/// A job handed to a daemon: its kind and inputs.
pub struct AcquiredJob {
    pub kind: JobKind,
    pub inputs: JobInputs,
}

impl Host {
    /// Claims a job for the daemon's `slot`, waiting up to `wait` for one;
    /// `None` when none came. The daemon's slot is listed as alive.
    ///
    /// A daemon that offers tags offers exactly its key's (sorted or not):
    /// the key decides which jobs it may run.
    pub async fn acquire_daemon_job(
        &self,
        caller: &DaemonCaller,
        offered_tags: &[String],
        slot: &str,
        version: &str,
        wait: Duration,
    ) -> Result<Option<AcquiredJob>, ControlError> {
        let mut offered = offered_tags.to_vec();
        offered.sort();
        if !offered.is_empty() && offered != caller.tags {
            return Err(ControlError::Forbidden(format!(
                "this provisioner offers the tags {} but its key {} has {}; start it without --tag, or with its key's tags",
                shown(&offered),
                caller.key_name,
                shown(&caller.tags)
            )));
        }
        let holder = daemon_holder(caller);
        let deadline = tokio::time::Instant::now() + wait.min(MAX_ACQUIRE_WAIT);
        let mut stopping = self.inner.stopping.subscribe();
        let lease_ms = i64::try_from(self.inner.config.job_lease.as_millis()).unwrap_or(i64::MAX);
        loop {
            self.beat_daemon(caller, slot, version).await?;
            if *stopping.borrow() {
                return Ok(None);
            }
            match self
                .inner
                .store
                .provisioner_key_by_hash(&caller.key_hash)
                .await
            {
                Ok(_) => {}
                Err(abode_store::StoreError::NotFound(_)) => {
                    return Err(ControlError::Unauthorized(
                        "this provisioner's key was deleted".into(),
                    ))
                }
                Err(error) => return Err(error.into()),
            }
            let claimed = self
                .inner
                .store
                .claim_tagged_job(slot, &holder, &caller.daemon_id, lease_ms, &caller.tags)
                .await?;
            if let Some(claimed) = claimed {
                let job = match ServerJob::load(
                    self,
                    &claimed.build_id,
                    &holder,
                    Some(slot),
                    claimed.kind,
                )
                .await
                {
                    Ok(job) => job,
                    Err(failure) => {
                        self.fail_unstarted(&claimed.build_id, &failure.message)
                            .await;
                        continue;
                    }
                };
                tracing::info!(build = %claimed.build_id, provisioner = %holder, "an external provisioner claimed a job");
                self.build_log()
                    .note(
                        &claimed.build_id,
                        &LogStage::SETUP,
                        LogLevel::Info,
                        &format!("claimed by {}", describe_holder(&holder)),
                    )
                    .await;
                match job.inputs().await {
                    Ok(inputs) => {
                        return Ok(Some(AcquiredJob {
                            kind: run_kind(claimed.kind),
                            inputs,
                        }))
                    }
                    Err(failure) => {
                        let _ = job.finish(Outcome::Failed(failure)).await;
                        continue;
                    }
                }
            }
            let now = tokio::time::Instant::now();
            if now >= deadline || *stopping.borrow() {
                return Ok(None);
            }
            let nap = ACQUIRE_POLL.min(deadline - now);
            tokio::select! {
                _ = self.jobs().woken() => {}
                _ = tokio::time::sleep(nap) => {}
                _ = stopping.changed() => {}
            }
        }
    }

    /// Refuses a daemon's call about `build_id` that no daemon of its key
    /// may make now, before the call's body is read: a daemon that lost a
    /// build (or never had it) is answered at once, whatever it sends. The
    /// exact check (this daemon, this slot) follows once the body says who
    /// calls.
    pub async fn daemon_may_call_about(
        &self,
        key_id: &str,
        build_id: &str,
        need: DaemonNeed,
    ) -> Result<(), ControlError> {
        let store = &self.inner.store;
        let holder = match need {
            DaemonNeed::Holding => store.claimed_job_holder(build_id).await,
            DaemonNeed::Held => store.job_lease_holder(build_id).await,
        };
        let holder = match holder {
            Ok(holder) => holder,
            Err(abode_store::StoreError::NotFound(_)) => None,
            Err(error) => return Err(error.into()),
        };
        let ours = holder.is_some_and(|holder| holder.starts_with(&key_holders(key_id)));
        match (ours, need) {
            (true, _) => Ok(()),
            (false, DaemonNeed::Holding) => Err(lost_job(build_id)),
            (false, DaemonNeed::Held) => Err(ControlError::Forbidden(format!(
                "build {build_id} was not run by this provisioner"
            ))),
        }
    }

    /// The job of `build_id` while this daemon holds it; a conflict once it
    /// does not (its lease ran out and the build was failed, or it ended).
    async fn daemon_job(
        &self,
        caller: &DaemonCaller,
        build_id: &str,
    ) -> Result<ServerJob, ControlError> {
        let holder = daemon_holder(caller);
        let kind = self
            .inner
            .store
            .claimed_job_kind(build_id, &holder, Some(&caller.slot))
            .await?
            .ok_or_else(|| lost_job(build_id))?;
        ServerJob::load(self, build_id, &holder, Some(&caller.slot), kind)
            .await
            .map_err(|failure| ControlError::Internal(failure.message))
    }

    /// Writes a daemon's log lines into its build's log: each with a stage
    /// of 1-32 printable characters and a known level, or none of them.
    pub async fn daemon_log(
        &self,
        caller: &DaemonCaller,
        build_id: &str,
        lines: &[LogLineWire],
    ) -> Result<(), ControlError> {
        let job = self.daemon_job(caller, build_id).await?;
        let mut checked = Vec::with_capacity(lines.len());
        for line in lines {
            let stage: LogStage =
                line.stage
                    .parse()
                    .map_err(|error: abode_contract::log::InvalidLogStage| {
                        ControlError::BadRequest(error.to_string())
                    })?;
            let level: LogLevel =
                line.level
                    .parse()
                    .map_err(|error: abode_contract::log::UnknownLogLevel| {
                        ControlError::BadRequest(error.to_string())
                    })?;
            checked.push((stage, level, &line.text));
        }
        for (stage, level, text) in checked {
            job.log(&stage, level, text).await;
        }
        Ok(())
    }

    /// The server's verdict on the plan a daemon's run made: judged exactly
    /// as an embedded run's ([`ServerJob`]'s `judge`).
    pub async fn daemon_judge(
        &self,
        caller: &DaemonCaller,
        build_id: &str,
        plan_json: Vec<u8>,
        plan: Vec<u8>,
    ) -> Result<Verdict, ControlError> {
        let job = self.daemon_job(caller, build_id).await?;
        Ok(job.judge_once(plan_json, plan).await?)
    }

    /// A daemon's apply succeeded: what it made is read from the state its
    /// Terraform stored through the state backend, only for a plan the
    /// server allowed (or a confirmed one).
    pub async fn daemon_applied(
        &self,
        caller: &DaemonCaller,
        build_id: &str,
    ) -> Result<(), ControlError> {
        let job = self.daemon_job(caller, build_id).await?;
        job.may_end_applied().await?;
        let stored = job
            .stored_state()
            .await
            .map_err(|failure| ControlError::Conflict(failure.message))?;
        job.record_applied(stored)
            .await
            .map_err(|failure| ControlError::Conflict(failure.message))
    }

    /// One step of the agents' shutdown scripts before a daemon applies a
    /// stop, restart or delete (`shutdown_step.rs`): whether they all ended.
    pub async fn daemon_shut_down_agents(
        &self,
        caller: &DaemonCaller,
        build_id: &str,
    ) -> Result<bool, ControlError> {
        let job = self.daemon_job(caller, build_id).await?;
        job.shut_down_agents()
            .await
            .map_err(|failure| ControlError::Conflict(failure.message))
    }

    /// The archive a daemon's run made of its snapshot order `index`
    /// before applying a confirmed plan, streamed in `body`: kept as the
    /// retained record of kind `snapshot` an embedded run's would be
    /// (`snapshot_step.rs`), or refused with nothing kept.
    pub async fn daemon_keep_snapshot<S, T, E>(
        &self,
        caller: &DaemonCaller,
        build_id: &str,
        index: u32,
        body: S,
    ) -> Result<abode_protocol::SnapshotAnswer, ControlError>
    where
        S: futures_util::Stream<Item = Result<T, E>> + Send,
        T: AsRef<[u8]>,
        E: std::fmt::Display,
    {
        let job = self.daemon_job(caller, build_id).await?;
        crate::provisioner::keep_uploaded_snapshot(&job, index, body).await
    }

    /// How a daemon's run ended, checked and recorded as an embedded run's
    /// end is (with what it measured of its time); the status the build
    /// ended in.
    pub async fn daemon_complete(
        &self,
        caller: &DaemonCaller,
        build_id: &str,
        told: Outcome,
        timings: Option<abode_runner::RunTimings>,
    ) -> Result<BuildStatus, ControlError> {
        let job = self.daemon_job(caller, build_id).await?;
        if let Some(timings) = timings {
            job.run_timings(timings).await;
        }
        job.finish(told).await
    }

    /// Renews the daemon's lease on `build_id`; true when a cancel of the
    /// build was asked (through any server).
    pub async fn daemon_heartbeat(
        &self,
        caller: &DaemonCaller,
        build_id: &str,
        slot: &str,
        version: &str,
    ) -> Result<bool, ControlError> {
        let holder = daemon_holder(caller);
        let lease_ms = i64::try_from(self.inner.config.job_lease.as_millis()).unwrap_or(i64::MAX);
        if !self
            .inner
            .store
            .renew_job_lease(build_id, &holder, Some(slot), lease_ms)
            .await?
        {
            return Err(lost_job(build_id));
        }
        self.beat_daemon(caller, slot, version).await?;
        Ok(self.inner.store.cancel_requested(build_id).await?)
    }

    /// Keeps a state a daemon's run of `build_id` wrote, while the run goes
    /// on or after it (a daemon that was cut off, or killed and started
    /// again): only a build this daemon ran, and only a successor of the
    /// stored state that no newer build has replaced.
    pub async fn daemon_keep_state(
        &self,
        caller: &DaemonCaller,
        build_id: &str,
        state: Vec<u8>,
        secret: Option<&str>,
    ) -> Result<StateKept, ControlError> {
        let holder = daemon_holder(caller);
        let held = self.inner.store.job_lease_holder(build_id).await?;
        if held.as_deref() != Some(holder.as_str()) {
            return Err(ControlError::Forbidden(format!(
                "build {build_id} was not run by this provisioner"
            )));
        }
        let kept = states::keep_state_bytes(self, build_id, state, secret).await;
        if let StateKept::Unavailable(reason) = &kept {
            // Answered as an error, which the daemon tries again.
            return Err(ControlError::Internal(format!(
                "the state could not be stored now: {reason}"
            )));
        }
        let build = self.inner.store.build_by_id(build_id).await?;
        if kept == StateKept::Saved && build.status != abode_store::BuildStatus::Running {
            self.build_log()
                .note(
                    build_id,
                    &LogStage::CLEANUP,
                    LogLevel::Info,
                    &format!(
                        "{} stored the state its run of this build left after the build ended",
                        describe_holder(&holder)
                    ),
                )
                .await;
        }
        Ok(kept)
    }

    /// A daemon's run of `build_id` ended: its state lock goes. With the
    /// run's secret, that run's lock; without (its work dir had none), any
    /// lock this daemon's runs took of the build, none of which is left.
    pub async fn daemon_release_state_lock(
        &self,
        caller: &DaemonCaller,
        build_id: &str,
        secret: Option<&str>,
    ) -> Result<bool, ControlError> {
        match secret {
            Some(secret) => self.release_state_lock(build_id, secret).await,
            None => Ok(self
                .inner
                .store
                .release_state_lock_of_holder(build_id, &daemon_holder(caller))
                .await?),
        }
    }

    /// Lists the daemon's slot as alive (`abode provisioner list`).
    async fn beat_daemon(
        &self,
        caller: &DaemonCaller,
        slot: &str,
        version: &str,
    ) -> Result<(), ControlError> {
        let forget_before = self.now_ms().saturating_sub(24 * 3600 * 1000);
        self.inner
            .store
            .beat_provisioners(
                &abode_store::ProvisionerBeat {
                    server_id: &daemon_holder(caller),
                    host: &caller.daemon_id,
                    kind: ProvisionerKind::External,
                    tags: &abode_control::tags::tags_json(&caller.tags),
                    version,
                },
                &[slot.to_string()],
                forget_before,
            )
            .await?;
        Ok(())
    }

    /// Fails a claimed build that could not even be read.
    async fn fail_unstarted(&self, build_id: &str, message: &str) {
        self.build_log()
            .note(build_id, &LogStage::CLEANUP, LogLevel::Error, message)
            .await;
        if let Err(error) = self
            .inner
            .store
            .finish_build(build_id, abode_store::BuildStatus::Failed, Some(message))
            .await
        {
            tracing::error!(build = %build_id, %error, "cannot record the end of a build");
        }
    }
}

fn shown(tags: &[String]) -> String {
    if tags.is_empty() {
        "(none)".into()
    } else {
        tags.join(",")
    }
}

fn lost_job(build_id: &str) -> ControlError {
    ControlError::Conflict(format!(
        "build {build_id} is not this provisioner's job any more (its lease ran out, or it ended)"
    ))
}
