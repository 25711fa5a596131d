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
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

use crate::provisioner::{self, log_output, BuildLog, Interruptions};
use crate::room::Host;
use crate::states::keep_state;
use abode_control::ControlError;
use abode_runner::workdir;
use abode_runner::StateKept;
use abode_runner::{LogLevel, LogStage, StateBackend};

/// The builds a dead server left running, each followed by a task that ends
/// when nothing of that build runs any more.
pub struct Recovered {
    pub interrupted: Vec<String>,
    pub followers: Vec<tokio::task::JoinHandle<()>>,
}

pub(crate) async fn recover(
    host: &Host,
    shutdown: watch::Receiver<bool>,
) -> Result<Recovered, ControlError> {
    let server = &host.inner.config.server_id;
    // Only this server's builds: another server's are its own, or, once its
    // lease runs out, failed by the others (`job_leases.rs`).
    let mut interrupted = host.inner.store.running_builds_of(server).await?;
    let base = host.inner.config.work_dir();
    // A build of this server that another one failed while this one was down
    // still has its work dir here, maybe with a newer state: followed alike.
    for build_id in leftover_build_dirs(&base) {
        if interrupted.contains(&build_id)
            || host
                .inner
                .store
                .job_lease_holder(&build_id)
                .await?
                .as_deref()
                != Some(server.as_str())
        {
            continue;
        }
        if host.inner.store.build_by_id(&build_id).await?.status == BuildStatus::Failed {
            interrupted.push(build_id);
        }
    }
    // A preview this server was planning when it died is planned again
    // (a plan never applies: nothing of it needs following).
    host.inner.store.requeue_previews(server, None).await?;
    // Its provisioners are listed again from this process's first heartbeat.
    host.inner.store.forget_provisioners(server).await?;
    // Its tunnels ended with the process; the agents connect again.
    host.inner.store.forget_agent_tunnels(server).await?;
    // A snapshot archive this server was writing when it died is nobody's.
    let snapshots = host.inner.config.snapshots_dir();
    tokio::task::spawn_blocking(move || provisioner::sweep_partials(&snapshots))
        .await
        .map_err(|error| ControlError::Internal(error.to_string()))?;
    let keep: Vec<PathBuf> = interrupted.iter().map(|id| base.join(id)).collect();
    workdir::clear_all_except(&base, &keep);
    // Listed as running here before any follower starts (each then puts its
    // own cancel switch in place): the keeper never takes a followed
    // build's state lock for one that nothing runs.
    for build_id in &interrupted {
        host.builds().cancel_switches().reserve(build_id);
    }
    let followers = interrupted
        .iter()
        .map(|build_id| tokio::spawn(adopt(host.clone(), build_id.clone(), shutdown.clone())))
        .collect();
    Ok(Recovered {
        interrupted,
        followers,
    })
}

/// The build's own process supervisor socket, opened again for as long as
/// this server follows its Terraform. The dead server's closed with it; an
/// apply that reaches a process or a volume meanwhile waits for it
/// (`abode_contract::supervisor::RESTART_PATIENCE`), for the same workspace
/// and uid as before (what it adopted was given to that uid then).
async fn reopen_supervisor(
    host: &Host,
    build_id: &str,
    work_dir: &Path,
) -> Option<abode_contract::supervisor::BuildSocket> {
    let config = &host.inner.config;
    let machine = config.process_supervisor.as_deref()?;
    let store = &host.inner.store;
    let opened = async {
        let build = store
            .build_by_id(build_id)
            .await
            .map_err(|e| e.to_string())?;
        let uid = match config.workspace_uids {
            Some((first, last)) => Some(
                store
                    .workspace_uid(&build.workspace_id, first, last)
                    .await
                    .map_err(|e| e.to_string())?,
            ),
            None => None,
        };
        let of = abode_contract::supervisor::BuildOf {
            workspace_id: build.workspace_id,
            agent_url: Some(config.access_url.clone()),
            uid,
            adopt: Vec::new(),
        };
        abode_runner::command::open_process_supervisor(Some(machine), work_dir, of)
            .await
            .map_err(|failure| failure.message)
    };
    match opened.await {
        Ok(socket) => socket,
        Err(reason) => {
            tracing::error!(build = %build_id, %reason, "cannot open the followed build's process supervisor socket again: what its apply asks of it fails");
            None
        }
    }
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
async fn adopt(host: Host, build_id: String, shutdown: watch::Receiver<bool>) {
    let (span, build) = provisioner::build_span(&host, &build_id).await;
    let status = follow_to_end(host.clone(), build_id, shutdown)
        .instrument(span)
        .await;
    if let Some(build) = build {
        let started = build.started_at.unwrap_or(build.created_at);
        provisioner::count_build_end(&host, &build, status, started);
    }
}

/// The build's Terraform followed until nothing of it runs, its state
/// kept and its end recorded; the status it ended in.
async fn follow_to_end(
    host: Host,
    build_id: String,
    shutdown: watch::Receiver<bool>,
) -> BuildStatus {
    let work_dir = host.inner.config.work_dir().join(&build_id);
    let record = RunRecord::in_dir(&work_dir);
    // A cancel asked of the dead server (recorded in the database) still holds.
    let (interruptions, cancel) = Interruptions::start(&host, &build_id, shutdown, None);

    let aftermath = match record.running() {
        Some(run) => {
            host.build_log().note(&build_id, &LogStage::CLEANUP, LogLevel::Error,
                &format!(
                    "the server stopped while terraform {} of this build was running; \
                     Terraform (pid {}) runs on, and this restarted server follows it until it ends",
                    run.command, run.identity.pid
                ),
            )
            .await;
            // The run's Terraform command is its stage (`init`, `plan`,
            // `apply`: the runner names both alike); a record naming none
            // that parses (written by hand) follows under `cleanup`.
            let stage = run.command.parse::<LogStage>().unwrap_or(LogStage::CLEANUP);
            // Held until the following ends.
            let _supervisor = reopen_supervisor(&host, &build_id, &work_dir).await;
            let already_logged = logged_lines(&host, &build_id, &stage).await;
            let (sender, receiver) = mpsc::unbounded_channel();
            let grace = host.inner.config.cancel_grace;
            let following = supervise::follow(&record, sender, cancel, grace);
            let sink = BuildLog {
                host: &host,
                build_id: &build_id,
            };
            let logging = log_output(Some(&sink), &stage, receiver, already_logged);
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

    let kept = keep_state(&host, &build_id, &work_dir).await;
    // No Terraform of the build runs any more: its state lock goes (a run
    // whose lock was taken from it releases nothing). Without the secret
    // (the server died before writing it), this server's lock of the build
    // is its own to release: no run of it is left here.
    let released = match StateBackend::secret_in(&work_dir) {
        Some(secret) => host.release_state_lock(&build_id, &secret).await,
        None => host
            .inner
            .store
            .release_state_lock_of_holder(&build_id, &host.inner.config.server_id)
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
    if confirmed_apply_succeeded(&host, &build_id, &aftermath, &kept).await {
        match record_recovered_apply(&host, &build_id).await {
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
        LogLevel::Info
    } else {
        LogLevel::Error
    };
    host.build_log()
        .note(&build_id, &LogStage::CLEANUP, level, &message)
        .await;
    // What a delete retained is on record whichever way it ended.
    abode_control::retention::settle(
        &host.inner.store,
        host.build_log(),
        host.notifications(),
        &build_id,
    )
    .await;
    if let Err(error) = host.inner.store.delete_saved_plan(&build_id).await {
        tracing::error!(build = %build_id, %error, "cannot delete the saved plan of an interrupted build");
    }
    let notices = host
        .notifications()
        .end_notices_of(&build_id, status, Some(&message))
        .await;
    let error = (status != BuildStatus::Succeeded).then_some(message.as_str());
    match host
        .inner
        .store
        .finish_build_notifying(&build_id, status, error, &notices)
        .await
    {
        // A recovered restart's stop has its start requested, as after any
        // succeeded stop (`rename_restart.rs`).
        Ok(_) if status == BuildStatus::Succeeded => host.continue_restarts().await,
        Ok(_) => {}
        Err(error) => {
            tracing::error!(build = %build_id, %error, "cannot record the end of an interrupted build")
        }
    }
    if !matches!(kept, StateKept::Refused(_) | StateKept::Unavailable(_)) {
        workdir::remove_off_runtime(work_dir.clone()).await;
    }
    interruptions.end();
    host.build_log().written();
    tracing::warn!(build = %build_id, status = %status, "interrupted build ended: {message}");
    status
}

/// Whether the followed Terraform was the apply of a confirmed plan this
/// server still holds, that ran on and ended without error, with its state
/// stored.
async fn confirmed_apply_succeeded(
    host: &Host,
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
    let server = &host.inner.config.server_id;
    matches!(
        host.inner
            .store
            .claimed_job_kind(build_id, server, None)
            .await,
        Ok(Some(abode_store::JobKind::ApplySavedPlan))
    )
}

/// Records what the recovered apply made, from the stored state (as a live
/// run's host does after its apply).
async fn record_recovered_apply(host: &Host, build_id: &str) -> Result<(), String> {
    let server = &host.inner.config.server_id;
    let kind = match host
        .inner
        .store
        .claimed_job_kind(build_id, server, None)
        .await
    {
        Ok(Some(kind)) => kind,
        Ok(None) => abode_store::JobKind::Build,
        Err(error) => return Err(error.to_string()),
    };
    let job = provisioner::ServerJob::load(host, build_id, server, None, kind)
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
async fn logged_lines(host: &Host, build_id: &str, stage: &LogStage) -> usize {
    const PAGE: i64 = 1000;
    let mut after = 0;
    let mut count = 0;
    loop {
        let Ok(page) = host.inner.store.logs_after(build_id, after, PAGE).await else {
            return count;
        };
        count += page.iter().filter(|line| line.stage == *stage).count();
        match page.last() {
            Some(last) if page.len() as i64 == PAGE => after = last.seq,
            _ => return count,
        }
    }
}
