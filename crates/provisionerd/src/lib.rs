//! The external provisioner daemon (`abode provisioner start`): builds run
//! outside the servers, on machines that hold the cloud credentials.
//!
//! Each of its `--concurrency` slots long-polls a server for a job its key's
//! tags cover, runs it with the embedded provisioners' runner
//! (`abode_runner`: the same work dir, environment contract,
//! provider mirror and Terraform commands), and reports to the server through
//! [`host::RemoteHost`]; the server judges every plan. While a job runs, a
//! heartbeat renews its lease each second and brings back a cancel asked of
//! any server.
//!
//! Faults: an unreachable server is waited for (the state after a run
//! without end); a deleted key stops the daemon; a daemon killed in the
//! middle of a run leaves its work dir, whose Terraform may still be
//! running: at its next start, it waits for that Terraform to end and
//! offers the state left behind (the server keeps it only if no newer build
//! of the workspace has run).
//!
//! A confirmed plan that destroys a protected volume is snapshotted here,
//! where the volume is, before the apply: the job's snapshot orders'
//! `snapshot_command`s run in the daemon's sandbox, and `RemoteHost`
//! archives the volume (`abode-volume-archive`, into the run's work dir)
//! and streams the archive to the server, which keeps it as the retained
//! record; if any of it fails, nothing is applied.
//!
//! `host.rs` is `RemoteHost`, a `BuildHost` over HTTP speaking
//! `abode-protocol`; `client.rs` makes each call on a blocking thread and tells
//! "unreachable" (try again) from "refused" (do not); `claims.rs` keeps which
//! slot claimed each running job in the data dir, so that a restarted daemon
//! speaks for a leftover run as that slot. Its id is kept in its data dir, so a
//! restarted daemon is the same provisioner. It links the runner, the protocol,
//! `abode-terraform` (the run records of a killed daemon's leftovers),
//! `abode-volume-archive` (snapshots) and `abode-tls` (its client's trust), never the store or the control plane
//! (`crates/abode/tests/house.rs`).
//!
//! # What it keeps
//!
//! - A job is its claiming slot's. The server holds a daemon's job for the slot
//!   that claimed it, and every call about it (heartbeat, log, verdict,
//!   applied, end) must come from that slot: a build queued again and claimed
//!   by another slot of the same daemon never takes the lost run's calls for
//!   its own (`crates/control/tests/daemon_claims.rs`). Embedded workers are
//!   held to the same rule.
//! - Nothing is lost to a fault. A log line is retried for seconds, a plan's
//!   verdict for minutes (nothing is applied without one); Terraform writes the
//!   state to the server's state backend itself (retrying while the server is
//!   away), and what it could not hand over (`errored.tfstate`) is uploaded
//!   until the server answers; a state the server does not keep stays in the
//!   work dir. The run's state lock is given back when its Terraform ended,
//!   whatever became of its lease. A killed daemon's work dirs are offered at
//!   its next start once their orphaned Terraform has ended. A deleted key
//!   (401) or tags other than the key's (403) stop it with one line.

mod claims;
mod client;
mod host;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use abode_protocol::{
    self, AcquireRequest, CompleteRequest, DaemonHello, HeartbeatAnswer, JobWire, StateAnswer,
    StateUpload,
};
use abode_runner as runner;
use abode_runner::{Failure, FailureKind, StateKept};
use abode_terraform::supervise::RunRecord;
use tokio::sync::{mpsc, watch};

pub use abode_runner::RunnerConfig;
use claims::Claims;
pub use client::CallError;
use client::ServerClient;
use host::{patiently, RemoteHost};

/// How often a running job's lease is renewed (and a cancel looked for).
const HEARTBEAT: Duration = Duration::from_secs(1);
/// How long one acquire waits on the server for a job.
const ACQUIRE_WAIT_SECONDS: u64 = 20;
/// The file in the data dir holding the daemon's id.
const ID_FILE: &str = "provisioner-id";

/// Why the daemon stopped on its own.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("the server refused this provisioner: {0}")]
    Refused(String),
    #[error("{0}")]
    Setup(String),
}

/// What a daemon is started with.
#[derive(Clone)]
pub struct DaemonConfig {
    /// The server's URL (`http://host:port`).
    pub url: String,
    /// The provisioner key's secret.
    pub key: String,
    /// The tags given with `--tag`; when given, they must be the key's.
    pub tags: Vec<String>,
    pub concurrency: usize,
    /// Where its id and work dirs live.
    pub data_dir: PathBuf,
    /// A name for its id and slots (the host name by default).
    pub name: String,
    pub runner: RunnerConfig,
}

/// Without the key and the environment passed to Terraform (credentials).
impl std::fmt::Debug for DaemonConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonConfig")
            .field("url", &self.url)
            .field("key", &"(hidden)")
            .field("tags", &self.tags)
            .field("concurrency", &self.concurrency)
            .field("data_dir", &self.data_dir)
            .field("name", &self.name)
            .field("work_dir", &self.runner.work_dir)
            .field("volumes_dir", &self.runner.volumes_dir)
            .finish_non_exhaustive()
    }
}

/// Runs the daemon until `shutdown` turns true (running jobs are
/// interrupted, their state uploaded and their end told) or the server
/// refuses it.
pub async fn run(config: DaemonConfig, shutdown: watch::Receiver<bool>) -> Result<(), DaemonError> {
    let daemon_id = daemon_id(&config.data_dir, &config.name)?;
    let client = ServerClient::new(&config.url, &config.key);
    tracing::info!(id = %daemon_id, url = %config.url, slots = config.concurrency, "provisioner started");
    let (fatal, mut fatal_told) = mpsc::channel::<String>(1);
    let daemon = Arc::new(Daemon {
        client,
        config,
        daemon_id,
    });
    // Listed before any slot lays out a new work dir or claims a job.
    let claims = Claims::in_data_dir(&daemon.config.data_dir);
    let left: Vec<Leftover> = leftover_dirs(&daemon.config.runner.work_dir)
        .into_iter()
        .map(|(build_id, dir)| Leftover {
            slot: claims.slot_of(&build_id),
            build_id,
            dir,
        })
        .collect();
    let leftovers = tokio::spawn(offer_leftovers(daemon.clone(), left));
    let mut slots = Vec::new();
    for index in 1..=daemon.config.concurrency.max(1) {
        let slot = format!("{}-{index}", daemon.daemon_id);
        slots.push(tokio::spawn(slot_loop(
            daemon.clone(),
            slot,
            shutdown.clone(),
            fatal.clone(),
        )));
    }
    drop(fatal);
    let mut shutdown_seen = shutdown.clone();
    let refused = tokio::select! {
        message = fatal_told.recv() => message,
        _ = async { while !*shutdown_seen.borrow_and_update() { if shutdown_seen.changed().await.is_err() { break; } } } => None,
    };
    if let Some(message) = refused {
        leftovers.abort();
        for slot in &slots {
            slot.abort();
        }
        return Err(DaemonError::Refused(message));
    }
    for slot in slots {
        let _ = slot.await;
    }
    leftovers.abort();
    Ok(())
}

struct Daemon {
    client: ServerClient,
    config: DaemonConfig,
    daemon_id: String,
}

impl Daemon {
    fn hello(&self, slot: &str) -> DaemonHello {
        DaemonHello {
            daemon_id: self.daemon_id.clone(),
            slot: slot.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// The daemon's id, kept in its data dir so that a restarted daemon is the
/// same provisioner (and may offer the states its last run left).
fn daemon_id(data_dir: &Path, name: &str) -> Result<String, DaemonError> {
    let path = data_dir.join(ID_FILE);
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => return Ok(id.trim().to_string()),
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(DaemonError::Setup(format!(
                "cannot read {}: {error}",
                path.display()
            )))
        }
    }
    let name: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(40)
        .collect();
    let name = if name.is_empty() {
        "provisioner".into()
    } else {
        name
    };
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let id = format!("{name}-{}", &suffix[..8]);
    std::fs::write(&path, format!("{id}\n"))
        .map_err(|error| DaemonError::Setup(format!("cannot write {}: {error}", path.display())))?;
    Ok(id)
}

/// One slot: acquire, run, tell the end; again until shutdown.
async fn slot_loop(
    daemon: Arc<Daemon>,
    slot: String,
    mut shutdown: watch::Receiver<bool>,
    fatal: mpsc::Sender<String>,
) {
    let request = AcquireRequest {
        hello: daemon.hello(&slot),
        tags: daemon.config.tags.clone(),
        wait_seconds: Some(ACQUIRE_WAIT_SECONDS),
    };
    let mut backoff = Duration::from_millis(500);
    let mut unreachable_told = false;
    loop {
        if *shutdown.borrow() {
            return;
        }
        let acquired = tokio::select! {
            acquired = daemon.client.post::<_, JobWire>("acquire", &request) => acquired,
            _ = shutdown.changed() => return,
        };
        match acquired {
            Ok(Some(job)) => {
                backoff = Duration::from_millis(500);
                unreachable_told = false;
                run_one(&daemon, &slot, job, shutdown.clone()).await;
            }
            Ok(None) => {
                backoff = Duration::from_millis(500);
                if unreachable_told {
                    tracing::info!(slot = %slot, "the server answers again");
                    unreachable_told = false;
                }
            }
            Err(
                error @ CallError::Refused {
                    status: 401 | 403, ..
                },
            ) => {
                let _ = fatal.send(error.to_string()).await;
                return;
            }
            Err(error) => {
                if !unreachable_told {
                    tracing::warn!(slot = %slot, %error, "cannot acquire a job; trying again");
                    unreachable_told = true;
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.changed() => return,
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
        }
    }
}

/// Runs one acquired job to its told end.
async fn run_one(daemon: &Daemon, slot: &str, job: JobWire, mut shutdown: watch::Receiver<bool>) {
    let build_id = job.build_id.clone();
    let host = RemoteHost::new(daemon.client.clone(), build_id.clone(), daemon.hello(slot));
    let inputs = match job.into_inputs(&daemon.config.url) {
        Ok(inputs) => inputs,
        Err(reason) => {
            let failure = Failure::failed(format!("the job could not be read: {reason}"));
            complete(&host, &Err(failure)).await;
            return;
        }
    };
    tracing::info!(build = %build_id, slot = %slot, kind = %inputs.kind, "running a job");
    let claims = Claims::in_data_dir(&daemon.config.data_dir);
    claims.record(&build_id, slot);
    let (cancel_switch, cancel) = watch::channel(false);
    let (lost_switch, lease_lost) = watch::channel(false);
    let heartbeat = heartbeat(&host, &cancel_switch, Some(&lost_switch));
    let by_shutdown = async {
        while !*shutdown.borrow_and_update() {
            if shutdown.changed().await.is_err() {
                return std::future::pending::<()>().await;
            }
        }
        let _ = cancel_switch.send(true);
        std::future::pending::<()>().await
    };
    let interrupts = runner::Interrupts { cancel, lease_lost };
    let running = runner::run_job(&daemon.config.runner, &host, inputs, interrupts);
    // The heartbeat, the shutdown watch and the log flusher never end by
    // themselves: the run's end is the only way out.
    let abandoned = || Err(Failure::failed("the run was abandoned"));
    let result = tokio::select! {
        result = running => result,
        _ = heartbeat => abandoned(),
        _ = by_shutdown => abandoned(),
        _ = host.flush_now_and_then() => abandoned(),
    };
    let result = result.map_err(|failure| {
        if failure.kind == FailureKind::Canceled && *shutdown.borrow() {
            Failure::failed("interrupted by a provisioner shutdown; the Terraform state was kept")
        } else {
            failure
        }
    });
    complete(&host, &result).await;
    claims.forget(&build_id, slot);
    tracing::info!(build = %build_id, "job ended");
}

/// Renews the job's lease every second and turns the cancel switch when a
/// cancel was asked; runs until dropped.
async fn heartbeat(
    host: &RemoteHost,
    cancel: &watch::Sender<bool>,
    lease_lost: Option<&watch::Sender<bool>>,
) {
    let mut lost_told = false;
    loop {
        tokio::time::sleep(HEARTBEAT).await;
        match host
            .client
            .post::<_, HeartbeatAnswer>(&format!("jobs/{}/heartbeat", host.build_id), &host.hello)
            .await
        {
            Ok(Some(answer)) if answer.canceled => {
                let _ = cancel.send(true);
            }
            Ok(_) => {}
            // Cut off: Terraform goes on; the state waits on disk.
            Err(CallError::Unreachable(_)) => {}
            Err(error) => {
                // Lost (its lease ran out and a server queued the build again
                // or failed it): no apply starts, and an `init` or `plan` is
                // stopped; a half-done apply is worse than a finished one, so
                // an apply runs on under the state lock the run still holds.
                if !lost_told {
                    tracing::warn!(build = %host.build_id, %error, "this job's lease was lost");
                    lost_told = true;
                }
                if error.is_lost() {
                    if let Some(lost) = lease_lost {
                        let _ = lost.send(true);
                    }
                }
            }
        }
    }
}

/// Tells the server how the run ended, until it has heard it.
async fn complete(host: &RemoteHost, result: &Result<abode_runner::Ended, Failure>) {
    host.flush().await;
    let request =
        CompleteRequest::new(host.hello.clone(), result).with_timings(host.timings_now().as_ref());
    match host
        .call::<_, abode_protocol::CompleteAnswer>("complete", &request, None)
        .await
    {
        Ok(_) => {}
        Err(error) => {
            tracing::warn!(build = %host.build_id, %error, "the server did not record this job's end")
        }
    }
}

/// Offers the states a killed run of this daemon left in its work dirs,
/// once no Terraform of theirs runs any more, and tells each build's end if
/// it is still this daemon's (a quick restart: its lease had not run out,
/// and the heartbeat keeps it while the orphaned Terraform finishes).
async fn offer_leftovers(daemon: Arc<Daemon>, left: Vec<Leftover>) {
    let claims = Claims::in_data_dir(&daemon.config.data_dir);
    for Leftover {
        build_id,
        dir,
        slot,
    } in left
    {
        // The slot that claimed it speaks for it (a work dir of a release
        // that noted no slot: the first one).
        let slot = slot.unwrap_or_else(|| format!("{}-1", daemon.daemon_id));
        let host = RemoteHost::new(daemon.client.clone(), build_id.clone(), daemon.hello(&slot));
        let record = RunRecord::in_dir(&dir);
        // Which run left it: a slot may lay out a new run of the same build
        // (queued again) in a work dir of the same name meanwhile.
        let left_by = abode_runner::StateBackend::secret_in(&dir);
        let running = record.running();
        let command = match &running {
            Some(run) => Some(run.command.clone()),
            None => record.read().map(|run| run.command),
        };
        // Only an apply's build is this daemon's to keep and to end: one
        // stopped before its plan was judged goes back to the queue when its
        // lease runs out (and may be this daemon's again by then).
        let applying = command.as_deref() == Some("apply");
        if let Some(run) = running {
            tracing::warn!(build = %build_id, pid = run.identity.pid, command = %run.command,
                "a Terraform this provisioner started before it stopped still runs; its state is offered when it ends");
            let (switch, _unused) = watch::channel(false);
            let ended = async {
                while record.running().is_some() {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            };
            let keeping = async {
                if applying {
                    heartbeat(&host, &switch, None).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = ended => {}
                () = keeping => {}
            }
        }
        // What Terraform could not hand to the state backend (a work dir of
        // a release before the backend keeps it in `terraform.tfstate`).
        let errored = dir.join("template").join("errored.tfstate");
        let state_file = if errored.exists() {
            errored
        } else {
            dir.join("template").join("terraform.tfstate")
        };
        let kept = match tokio::fs::read(&state_file).await {
            Ok(state) => offer_leftover_state(&daemon, &build_id, state, left_by.clone()).await,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => StateKept::Missing,
            Err(error) => StateKept::Refused(format!("cannot read it: {error}")),
        };
        let state = match &kept {
            StateKept::Saved => "its state was stored".to_string(),
            StateKept::Missing | StateKept::Unchanged => {
                "the stored state was already up to date".to_string()
            }
            StateKept::Refused(reason) | StateKept::Unavailable(reason) => {
                format!("its state was NOT stored ({reason})")
            }
        };
        let during = match &command {
            Some(command) => format!("during terraform {command}; Terraform ran on and ended"),
            None => "while this build ran".to_string(),
        };
        let message =
            format!("the provisioner stopped {during}; {state}; run the build again to finish it");
        // No Terraform of the run runs any more: its state lock goes (by
        // the run's secret; without one, this daemon's lock of the build).
        host::release_state_lock(&daemon.client, &build_id, &host.hello, left_by.as_deref()).await;
        // Only if the build is still this daemon's: otherwise (409) a server
        // has failed it already.
        if applying {
            let request = CompleteRequest::new(host.hello.clone(), &Err(Failure::failed(message)));
            let _ = host
                .call::<_, abode_protocol::CompleteAnswer>(
                    "complete",
                    &request,
                    Some(Duration::from_secs(60)),
                )
                .await;
        }
        claims.forget(&build_id, &slot);
        match kept {
            StateKept::Refused(reason) | StateKept::Unavailable(reason) => {
                tracing::warn!(build = %build_id, dir = %dir.display(), %reason,
                "the state a stopped run left was not stored; its work dir is kept")
            }
            kept => {
                tracing::info!(build = %build_id, ?kept, "offered the state a stopped run left");
                if abode_runner::StateBackend::secret_in(&dir) == left_by {
                    let _ = tokio::fs::remove_dir_all(&dir).await;
                }
            }
        }
    }
}

/// A work dir a previous run of the daemon left.
struct Leftover {
    build_id: String,
    dir: PathBuf,
    /// The slot that claimed its build, if noted.
    slot: Option<String>,
}

/// The work dirs a previous run of the daemon left, by build id.
fn leftover_dirs(base: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| entry.path().is_dir())
        .filter_map(|entry| Some((entry.file_name().into_string().ok()?, entry.path())))
        .collect()
}

async fn offer_leftover_state(
    daemon: &Daemon,
    build_id: &str,
    state: Vec<u8>,
    secret: Option<String>,
) -> StateKept {
    let upload = StateUpload {
        hello: daemon.hello(&format!("{}-1", daemon.daemon_id)),
        state: abode_protocol::encode(&state),
        last: true,
        secret,
    };
    let path = format!("jobs/{build_id}/state");
    match patiently(None, || {
        daemon.client.post::<_, StateAnswer>(&path, &upload)
    })
    .await
    {
        Ok(Some(answer)) => answer.parse().unwrap_or_else(StateKept::Refused),
        Ok(None) => StateKept::Refused("the server said nothing of the state".into()),
        Err(error) => StateKept::Refused(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A restarted daemon is the same provisioner (its leftovers are its
    /// own to offer); its name is kept to what a lease holder may hold.
    #[test]
    fn the_daemon_id_is_made_once_from_a_clean_name_and_kept() {
        let cases = [
            ("builder-1", "builder-1-"),
            ("a b/c\n\"d\"", "abcd-"),
            ("", "provisioner-"),
            ("../../etc", "....etc-"),
            ("工作区", "provisioner-"),
        ];
        for (name, prefix) in cases {
            let dir = tempfile::tempdir().unwrap();
            let id = daemon_id(dir.path(), name).unwrap();
            assert!(id.starts_with(prefix), "{name:?}: {id}");
            assert_eq!(id.len(), prefix.len() + 8, "{id}");
            assert_eq!(daemon_id(dir.path(), "another name").unwrap(), id);
        }
        let long = "x".repeat(100);
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(daemon_id(dir.path(), &long).unwrap().len(), 40 + 1 + 8);
    }

    #[test]
    fn an_unreadable_id_file_is_one_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(ID_FILE)).unwrap();
        let error = daemon_id(dir.path(), "d").unwrap_err().to_string();
        assert!(error.contains(ID_FILE), "{error}");
        assert!(!error.contains('\n'), "{error}");
    }

    #[test]
    fn leftovers_are_the_work_dirs_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("build-a")).unwrap();
        std::fs::create_dir(dir.path().join("build-b")).unwrap();
        std::fs::write(dir.path().join("stray-file"), b"x").unwrap();
        let mut found: Vec<String> = leftover_dirs(dir.path())
            .into_iter()
            .map(|(id, path)| {
                assert_eq!(path, dir.path().join(&id));
                id
            })
            .collect();
        found.sort();
        assert_eq!(found, ["build-a", "build-b"]);
        assert!(leftover_dirs(&dir.path().join("missing")).is_empty());
    }
}
