//! Taking over what a server that died left behind.
//!
//! A server can be killed in the middle of a build. Its Terraform is not
//! killed with it (see `abode_terraform::supervise`): a half-finished apply is
//! worse than a finished one, since a resource being created would be created
//! again by the next build if its creation never reached the stored state. So
//! at start, for every build the database still calls `running`:
//!
//! 1. the build stays `running` (the workspace's one active build) for as long
//!    as any Terraform of it runs: a restarted server follows that exact
//!    process (pid and start time, recorded in the work dir), appends what it
//!    prints to the build log, and honours a cancel;
//! 2. once nothing of the build runs, the state Terraform left in the work dir
//!    is stored (if it is a valid state of the same lineage, not older than
//!    the stored one);
//! 3. the build ends `failed` (or `canceled`) with a message saying what
//!    happened, a confirmed plan is never applied again, and the work dir is
//!    removed (kept, and named in the log, if its state could not be stored).

use std::path::{Path, PathBuf};

use abode_store::BuildStatus;
use abode_terraform::supervise::{self, Followed, RunRecord};
use serde::Deserialize;
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

use crate::provisioner::{self, log_output, BuildLog, Interruptions};
use crate::{Control, ControlError};
use abode_runner::workdir::{self, ERRORED_STATE_FILE, STATE_FILE, TEMPLATE_SUBDIR};
use abode_runner::StateBackend;
use abode_runner::StateKept;

/// The builds a dead server left running, each followed by a task that ends
/// when nothing of that build runs any more.
pub struct Recovered {
    pub interrupted: Vec<String>,
    pub followers: Vec<tokio::task::JoinHandle<()>>,
}

pub(crate) async fn recover(
    control: &Control,
    shutdown: watch::Receiver<bool>,
) -> Result<Recovered, ControlError> {
    let server = &control.inner.config.server_id;
    // Only this server's builds: another server's are its own, or, once its
    // lease runs out, failed by the others (`job_leases.rs`).
    let mut interrupted = control.inner.store.running_builds_of(server).await?;
    let base = control.inner.config.work_dir();
    // A build of this server that another one failed while this one was down
    // still has its work dir here, maybe with a newer state: followed alike.
    for build_id in leftover_build_dirs(&base) {
        if interrupted.contains(&build_id)
            || control
                .inner
                .store
                .job_lease_holder(&build_id)
                .await?
                .as_deref()
                != Some(server.as_str())
        {
            continue;
        }
        if control.inner.store.build_by_id(&build_id).await?.status == BuildStatus::Failed {
            interrupted.push(build_id);
        }
    }
    // A preview this server was planning when it died is planned again
    // (a plan never applies: nothing of it needs following).
    control.inner.store.requeue_previews(server, None).await?;
    // Its provisioners are listed again from this process's first heartbeat.
    control.inner.store.forget_provisioners(server).await?;
    // Its tunnels ended with the process; the agents connect again.
    control.inner.store.forget_agent_tunnels(server).await?;
    let keep: Vec<PathBuf> = interrupted.iter().map(|id| base.join(id)).collect();
    workdir::clear_all_except(&base, &keep);
    // Listed as running here before any follower starts (each then puts its
    // own cancel switch in place): the keeper never takes a followed
    // build's state lock for one that nothing runs.
    if let Ok(mut running) = control.inner.running.lock() {
        for build_id in &interrupted {
            running
                .entry(build_id.clone())
                .or_insert_with(|| watch::channel(false).0);
        }
    }
    let followers = interrupted
        .iter()
        .map(|build_id| tokio::spawn(adopt(control.clone(), build_id.clone(), shutdown.clone())))
        .collect();
    Ok(Recovered {
        interrupted,
        followers,
    })
}

/// The names of the work dirs left under `base` (a build's is its id).
fn leftover_build_dirs(base: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| entry.path().is_dir())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .collect()
}

/// What became of a build's Terraform after the restart.
enum Aftermath {
    /// Terraform ran on without the server and ended by itself.
    RanOn {
        command: String,
        error: Option<String>,
    },
    /// Terraform had already stopped (or never started).
    Stopped {
        command: Option<String>,
    },
    Canceled {
        command: String,
        killed: bool,
    },
    Shutdown,
}

/// Follows one interrupted build to its end, every log line in the build's
/// span, and counts its end in the metrics.
async fn adopt(control: Control, build_id: String, shutdown: watch::Receiver<bool>) {
    let (span, build) = provisioner::build_span(&control, &build_id).await;
    let status = follow_to_end(control.clone(), build_id, shutdown)
        .instrument(span)
        .await;
    if let Some(build) = build {
        let started = build.started_at.unwrap_or(build.created_at);
        provisioner::count_build_end(&control, &build, status, started);
    }
}

/// The build's Terraform followed until nothing of it runs, its state
/// kept and its end recorded; the status it ended in.
async fn follow_to_end(
    control: Control,
    build_id: String,
    shutdown: watch::Receiver<bool>,
) -> BuildStatus {
    let work_dir = control.inner.config.work_dir().join(&build_id);
    let record = RunRecord::in_dir(&work_dir);
    // A cancel asked of the dead server (recorded in the database) still holds.
    let (interruptions, cancel) = Interruptions::start(&control, &build_id, shutdown, None);

    let aftermath = match record.running() {
        Some(run) => {
            control.note(&build_id, "cleanup", "error",
                &format!(
                    "the server stopped while terraform {} of this build was running; \
                     Terraform (pid {}) runs on, and this restarted server follows it until it ends",
                    run.command, run.identity.pid
                ),
            )
            .await;
            let already_logged = logged_lines(&control, &build_id, &run.command).await;
            let (sender, receiver) = mpsc::unbounded_channel();
            let grace = control.inner.config.cancel_grace;
            let following = supervise::follow(&record, sender, cancel, grace);
            let sink = BuildLog {
                control: &control,
                build_id: &build_id,
            };
            let logging = log_output(Some(&sink), &run.command, receiver, already_logged);
            let (followed, error) = tokio::join!(following, logging);
            match followed {
                Followed::Ended(run) => Aftermath::RanOn {
                    command: run.command,
                    error: error.map(|error| error.text),
                },
                Followed::Canceled { .. } if interruptions.by_shutdown() => Aftermath::Shutdown,
                Followed::Canceled { run, killed } => Aftermath::Canceled {
                    command: run.command,
                    killed,
                },
                // It ended between the two looks.
                Followed::NotRunning => Aftermath::Stopped {
                    command: Some(run.command),
                },
            }
        }
        None => Aftermath::Stopped {
            command: record.read().map(|run| run.command),
        },
    };

    let kept = keep_state(&control, &build_id, &work_dir).await;
    // No Terraform of the build runs any more: its state lock goes (a run
    // whose lock was taken from it releases nothing). Without the secret
    // (the server died before writing it), this server's lock of the build
    // is its own to release: no run of it is left here.
    let released = match StateBackend::secret_in(&work_dir) {
        Some(secret) => control.release_state_lock(&build_id, &secret).await,
        None => control
            .inner
            .store
            .release_state_lock_of_holder(&build_id, &control.inner.config.server_id)
            .await
            .map_err(Into::into),
    };
    if let Err(error) = released {
        tracing::error!(build = %build_id, %error, "cannot release the workspace's state lock; the keeper tries again");
    }
    let (mut status, mut message) = describe(&aftermath, &kept, &work_dir);
    // A confirmed plan whose apply ran to success is the person's
    // confirmation carried out: the build succeeds, and the workspace moves
    // to the confirmed version and parameters, as if the server had not died
    // (otherwise its next build would plan to undo what they confirmed).
    if confirmed_apply_succeeded(&control, &build_id, &aftermath, &kept).await {
        match record_recovered_apply(&control, &build_id).await {
            Ok(()) => {
                status = BuildStatus::Succeeded;
                message = "the server stopped during terraform apply of the confirmed plan; \
                           Terraform ran on and ended without error and its state was saved: \
                           the build succeeded (recovered)"
                    .to_string();
            }
            Err(reason) => {
                tracing::error!(build = %build_id, %reason, "cannot record what a recovered apply made");
            }
        }
    }
    let level = if status == BuildStatus::Succeeded {
        "info"
    } else {
        "error"
    };
    control.note(&build_id, "cleanup", level, &message).await;
    if let Err(error) = control.inner.store.delete_saved_plan(&build_id).await {
        tracing::error!(build = %build_id, %error, "cannot delete the saved plan of an interrupted build");
    }
    let notices = control
        .end_notices_of(&build_id, status, Some(&message))
        .await;
    let error = (status != BuildStatus::Succeeded).then_some(message.as_str());
    match control
        .inner
        .store
        .finish_build_notifying(&build_id, status, error, &notices)
        .await
    {
        Ok(_) => {}
        Err(error) => {
            tracing::error!(build = %build_id, %error, "cannot record the end of an interrupted build")
        }
    }
    if !matches!(kept, StateKept::Refused(_) | StateKept::Unavailable(_)) {
        workdir::remove_off_runtime(work_dir.clone()).await;
    }
    interruptions.end();
    control.inner.log_written.notify_waiters();
    tracing::warn!(build = %build_id, status = %status, "interrupted build ended: {message}");
    status
}

/// Whether the followed Terraform was the apply of a confirmed plan this
/// server still holds, that ran on and ended without error, with its state
/// stored.
async fn confirmed_apply_succeeded(
    control: &Control,
    build_id: &str,
    aftermath: &Aftermath,
    kept: &StateKept,
) -> bool {
    let ran_to_success = matches!(
        aftermath,
        Aftermath::RanOn { command, error: None } if command == "apply"
    );
    if !ran_to_success || matches!(kept, StateKept::Refused(_) | StateKept::Unavailable(_)) {
        return false;
    }
    let server = &control.inner.config.server_id;
    matches!(
        control.inner.store.claimed_job_kind(build_id, server).await,
        Ok(Some(abode_store::JobKind::ApplySavedPlan))
    )
}

/// Records what the recovered apply made, from the stored state (as a live
/// run's host does after its apply).
async fn record_recovered_apply(control: &Control, build_id: &str) -> Result<(), String> {
    let server = &control.inner.config.server_id;
    let kind = match control.inner.store.claimed_job_kind(build_id, server).await {
        Ok(Some(kind)) => kind,
        Ok(None) => abode_store::JobKind::Build,
        Err(error) => return Err(error.to_string()),
    };
    let job = provisioner::ServerJob::load(control, build_id, server, kind)
        .await
        .map_err(|failure| failure.message)?;
    let state = job
        .stored_state()
        .await
        .map_err(|failure| failure.message)?;
    job.record_applied(state)
        .await
        .map_err(|failure| failure.message)
}

fn describe(aftermath: &Aftermath, kept: &StateKept, work_dir: &Path) -> (BuildStatus, String) {
    let state = match kept {
        StateKept::Saved => "its state was saved".to_string(),
        // Everything Terraform wrote reached the state backend as it went.
        StateKept::Missing => "its state was saved by Terraform itself".to_string(),
        StateKept::Unchanged => "the stored state was already up to date".to_string(),
        StateKept::Refused(reason) | StateKept::Unavailable(reason) => format!(
            "its state was NOT stored ({reason}); the work dir is kept at {}",
            work_dir.display()
        ),
    };
    match aftermath {
        Aftermath::RanOn { command, error } => {
            let ended = match error {
                Some(error) => format!("ended with: {error}"),
                None => "ended without error".to_string(),
            };
            (
                BuildStatus::Failed,
                format!(
                    "the server stopped during terraform {command}; Terraform ran on and {ended}; \
                     {state}; run the build again to finish it"
                ),
            )
        }
        Aftermath::Stopped { command } => {
            let during = match command {
                Some(command) => format!("during terraform {command}"),
                None => "while this build was running".to_string(),
            };
            (
                BuildStatus::Failed,
                format!("the server stopped {during}; no Terraform of this build runs any more; {state}"),
            )
        }
        Aftermath::Canceled { command, killed } => {
            let how = if *killed {
                "; Terraform did not stop in time and was killed"
            } else {
                ""
            };
            (
                BuildStatus::Canceled,
                format!("canceled during terraform {command} after a server restart{how}; {state}"),
            )
        }
        Aftermath::Shutdown => (
            BuildStatus::Failed,
            "interrupted by a server shutdown; the Terraform state was kept".to_string(),
        ),
    }
}

/// How many lines of `stage` the build log already has: the dead server
/// logged Terraform's output up to there, the follower resumes after it.
async fn logged_lines(control: &Control, build_id: &str, stage: &str) -> usize {
    const PAGE: i64 = 1000;
    let mut after = 0;
    let mut count = 0;
    loop {
        let Ok(page) = control.inner.store.logs_after(build_id, after, PAGE).await else {
            return count;
        };
        count += page.iter().filter(|line| line.stage == stage).count();
        match page.last() {
            Some(last) if page.len() as i64 == PAGE => after = last.seq,
            _ => return count,
        }
    }
}

/// The two fields that say whether one Terraform state follows another.
#[derive(Deserialize)]
struct StateHeader {
    lineage: String,
    serial: u64,
}

/// Stores the Terraform state in a build's work dir as the workspace's state,
/// if it can only be newer: a state file cut short by a crash, or one from
/// another lineage, never replaces a good stored state.
pub(crate) async fn keep_state(control: &Control, build_id: &str, work_dir: &Path) -> StateKept {
    // The state backend has what Terraform handed it; what it could not
    // hand over is in `errored.tfstate` (a work dir of a release before the
    // backend has its state in `terraform.tfstate`).
    let template = work_dir.join(TEMPLATE_SUBDIR);
    let errored = template.join(ERRORED_STATE_FILE);
    let path = if errored.exists() {
        errored
    } else {
        template.join(STATE_FILE)
    };
    let read = tokio::task::spawn_blocking(move || std::fs::read(path)).await;
    let state = match read {
        Ok(Ok(state)) => state,
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::NotFound => {
            return StateKept::Missing
        }
        Ok(Err(error)) => return StateKept::Refused(format!("cannot read it: {error}")),
        Err(error) => return StateKept::Refused(format!("cannot read it: {error}")),
    };
    let secret = StateBackend::secret_in(work_dir);
    keep_state_bytes(control, build_id, state, secret.as_deref()).await
}

/// Stores `state`, written by a run of `build_id`, as its workspace's state
/// if it can only be newer (see [`keep_state`]). A run of the state backend
/// (`secret`) stores it only while it still holds the workspace's state lock,
/// in the write's own transaction: after a person's unlock, what a lost
/// holder's Terraform left is kept in its work dir, never stored. A run of
/// an older release (no secret) is judged by the builds that came after it.
pub(crate) async fn keep_state_bytes(
    control: &Control,
    build_id: &str,
    state: Vec<u8>,
    secret: Option<&str>,
) -> StateKept {
    let store = &control.inner.store;
    let build = match store.build_by_id(build_id).await {
        Ok(build) => build,
        Err(error) => return StateKept::Unavailable(format!("storage error: {error}")),
    };
    // A build that ended without this server (another one failed it when its
    // lease ran out) may have been followed by newer builds: their state is
    // the workspace's now, and this one's is kept aside, never stored over it.
    match store.latest_build(&build.workspace_id).await {
        Ok(latest) if latest.number > build.number => {
            return StateKept::Refused(format!(
                "build #{} of this workspace came after this one; its state is not replaced by this build's",
                latest.number
            ))
        }
        Ok(_) => {}
        Err(error) => return StateKept::Unavailable(format!("storage error: {error}")),
    }
    let fence = secret.map(|secret| Fence {
        secret_hash: crate::secrets::token_hash(secret),
        terraform_lock_id: None,
    });
    match write_successor(
        control,
        &build.workspace_id,
        build_id,
        &state,
        fence.as_ref(),
    )
    .await
    {
        Written::Saved => StateKept::Saved,
        Written::Unchanged => StateKept::Unchanged,
        Written::NotSuccessor(reason) => StateKept::Refused(reason),
        Written::Fenced => StateKept::Refused(
            "this run no longer holds the workspace's state lock (it was unlocked)".into(),
        ),
        Written::Failed(error) => StateKept::Unavailable(format!("storage error: {error}")),
        Written::KeptChanging => StateKept::Unavailable(
            "the stored state kept changing while this one was compared".into(),
        ),
    }
}

/// The lock a state write must be made under: the run's (the SHA-256 of its
/// secret) and, when Terraform names one, its Terraform lock.
pub(crate) struct Fence<'a> {
    pub(crate) secret_hash: String,
    pub(crate) terraform_lock_id: Option<&'a str>,
}

/// What writing a state that must follow the stored one came to.
pub(crate) enum Written {
    Saved,
    /// The stored state is byte for byte the same.
    Unchanged,
    /// Not of the stored state's lineage, an older serial, or not a state.
    NotSuccessor(String),
    /// The run does not hold the lock it was to be written under.
    Fenced,
    Failed(abode_store::StoreError),
    /// Other writes kept coming between the comparison and this one.
    KeptChanging,
}

/// Stores `state` as the workspace's if it follows the stored one (a whole
/// state of the same lineage, serial not lower), under `fence` when given.
/// Compared and written as one step: two writes of the same build's state
/// (a half-way one and the last, on two servers) cannot both pass the
/// comparison and leave the older one stored.
pub(crate) async fn write_successor(
    control: &Control,
    workspace_id: &str,
    build_id: &str,
    state: &[u8],
    fence: Option<&Fence<'_>>,
) -> Written {
    let store = &control.inner.store;
    for _ in 0..STATE_WRITE_ATTEMPTS {
        let stored = match store.state(workspace_id).await {
            Ok(stored) => stored,
            Err(error) => return Written::Failed(error),
        };
        if let Err(reason) = successor(stored.as_deref(), state) {
            return Written::NotSuccessor(reason);
        }
        if stored.as_deref() == Some(state) {
            return Written::Unchanged;
        }
        let written = match fence {
            Some(fence) => store
                .put_state_fenced(
                    workspace_id,
                    build_id,
                    &fence.secret_hash,
                    fence.terraform_lock_id,
                    state,
                    stored.as_deref(),
                )
                .await
                .map(|written| match written {
                    abode_store::FencedWrite::Written => Some(true),
                    abode_store::FencedWrite::Raced => Some(false),
                    abode_store::FencedWrite::Fenced => None,
                }),
            None => store
                .put_state_replacing(workspace_id, build_id, state, stored.as_deref())
                .await
                .map(Some),
        };
        match written {
            Ok(Some(true)) => return Written::Saved,
            // Another write came first: compared again with it.
            Ok(Some(false)) => continue,
            Ok(None) => return Written::Fenced,
            Err(error) => return Written::Failed(error),
        }
    }
    Written::KeptChanging
}

/// How many times a state is compared again when another write came
/// between its comparison and its own.
const STATE_WRITE_ATTEMPTS: usize = 3;

/// Whether `new` may replace `stored`: a whole state of the same lineage
/// whose serial is not lower.
fn successor(stored: Option<&[u8]>, new: &[u8]) -> Result<(), String> {
    let new: StateHeader = serde_json::from_slice(new)
        .map_err(|_| "the state file is not a whole Terraform state".to_string())?;
    let Some(stored) = stored else {
        return Ok(());
    };
    let Ok(stored) = serde_json::from_slice::<StateHeader>(stored) else {
        // The stored one is not a state Abode can compare; the new one is.
        return Ok(());
    };
    if stored.lineage != new.lineage {
        return Err(format!(
            "its lineage {} is not the stored state's {}",
            new.lineage, stored.lineage
        ));
    }
    if new.serial < stored.serial {
        return Err(format!(
            "its serial {} is older than the stored state's {}",
            new.serial, stored.serial
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_whole_state_of_the_same_lineage_and_no_older_serial_follows() {
        let state = |lineage: &str, serial: u64| {
            format!(r#"{{"version":4,"serial":{serial},"lineage":"{lineage}","resources":[]}}"#)
                .into_bytes()
        };
        let stored = state("a", 5);
        let stored = Some(stored.as_slice());
        let cut_short = br#"{"version":4,"serial":7,"lin"#.to_vec();
        let cases = [
            (None, state("a", 1), true),
            (stored, state("a", 5), true),
            (stored, state("a", 6), true),
            (stored, state("a", 4), false),
            (stored, state("b", 9), false),
            (stored, cut_short, false),
        ];
        for (stored, new, follows) in cases {
            assert_eq!(
                successor(stored, &new).is_ok(),
                follows,
                "{}",
                String::from_utf8_lossy(&new)
            );
        }
    }
}
