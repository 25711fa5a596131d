//! The embedded provisioners: workers that claim queued jobs and run each
//! build through Terraform. This file is the sequence; its steps live beside it.
//!
//! A build, once the door (`builds.rs`) has queued it: a worker claims its job
//! ([`worker`]), [`run_build`] lays out a private work dir (`run.rs`: the
//! template version unpacked, the workspace's stored state, the CLI
//! configuration and the environment contract), runs `terraform init` and
//! `terraform plan -out` (`-destroy` for a delete), hands `terraform show
//! -json` of the saved plan to the guard (`guard_step.rs`), and then applies
//! exactly that plan (`allow`), holds it for confirmation (`confirm`, see
//! `held.rs`) or fails the build (`block`). A confirmed plan that destroys
//! or replaces a protected resource is applied only after its snapshot
//! (`snapshot_step.rs`; a daemon's run takes it where the volume is and
//! uploads the archive). Whatever happened, the state
//! Terraform left is stored, the work dir removed and the build's end
//! recorded. Terraform's `-json` lines reach the build log as they are
//! printed (`output.rs`); a cancel or a shutdown interrupts the run
//! (`interruptions.rs`). Each stage's time, and each resource's, is
//! recorded for the build's timings (`timing_step.rs`).

mod ephemeral;
mod guard_step;
mod interruptions;
mod on_server;
mod preview;
mod quota_step;
mod retain_step;
mod run;
mod shutdown_step;
mod snapshot_step;
mod timing_step;

use std::time::Duration;

use abode_store::{Build, BuildStatus, JobKind};
use tokio::sync::watch;
use tracing::Instrument;

use crate::room::Host;

pub(crate) use abode_runner::output::log_output;
use abode_runner::{LogLevel, LogSink, LogStage, RunnerConfig};
pub(crate) use interruptions::Interruptions;
pub use on_server::{JudgeError, ServerJob};
pub(crate) use run::run_kind;
pub(crate) use snapshot_step::{keep_uploaded as keep_uploaded_snapshot, sweep_partials};

/// The log of a build this server records itself.
pub(crate) struct BuildLog<'a> {
    pub(crate) host: &'a Host,
    pub(crate) build_id: &'a str,
}

impl LogSink for BuildLog<'_> {
    async fn log(&self, stage: &LogStage, level: LogLevel, text: &str) {
        self.host
            .build_log()
            .note(self.build_id, stage, level, text)
            .await;
    }
}

/// How long an idle worker sleeps before looking at the queue again even
/// without a wake-up (jobs queued by another process).
const IDLE_POLL: Duration = Duration::from_secs(2);

/// A worker: claims build jobs, people's first, and when none waits and it
/// `takes_previews`, fleet previews' plans (so a preview never delays a
/// build that is queued: with more than one worker, the first keeps itself
/// for builds).
pub(crate) async fn worker(
    host: Host,
    name: String,
    takes_previews: bool,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        if *shutdown.borrow() {
            break;
        }
        // A data dir low on space takes no new build (`free_disk.rs`).
        if host.low_on_disk() {
            tokio::select! {
                _ = host.jobs().woken() => {}
                _ = tokio::time::sleep(IDLE_POLL) => {}
                _ = shutdown.changed() => {}
            }
            continue;
        }
        let lease_ms = i64::try_from(host.inner.config.job_lease.as_millis()).unwrap_or(i64::MAX);
        let claimed = host
            .inner
            .store
            .claim_tagged_job(
                &name,
                &host.inner.config.server_id,
                host.host_id(),
                lease_ms,
                &host.inner.config.provisioner_tags,
            )
            .await;
        host.background_pass(abode_metrics::PASS_PROVISIONER);
        match claimed {
            Ok(Some(job)) => {
                run_build(&host, &name, &job.build_id, job.kind, shutdown.clone()).await;
            }
            Ok(None) => {
                if takes_previews && claim_and_run_preview(&host, &name, &shutdown).await {
                    continue;
                }
                tokio::select! {
                    _ = host.jobs().woken() => {}
                    _ = tokio::time::sleep(IDLE_POLL) => {}
                    _ = shutdown.changed() => {}
                }
            }
            Err(error) => {
                tracing::error!(worker = %name, %error, "cannot claim a job");
                tokio::time::sleep(IDLE_POLL).await;
            }
        }
    }
}

/// Plans one waiting preview result, if there is one; false when none waits.
async fn claim_and_run_preview(
    host: &Host,
    worker: &str,
    shutdown: &watch::Receiver<bool>,
) -> bool {
    // Under the job lease, which the keeper renews while this server lives.
    let lease_ms = i64::try_from(host.inner.config.job_lease.as_millis()).unwrap_or(i64::MAX);
    match host
        .inner
        .store
        .claim_preview(
            worker,
            &host.inner.config.server_id,
            lease_ms,
            &host.inner.config.provisioner_tags,
        )
        .await
    {
        Ok(Some(claimed)) => {
            let _busy = host.inner.config.metrics.provisioner_busy();
            preview::run_preview(host, &claimed, shutdown.clone()).await;
            true
        }
        Ok(None) => false,
        Err(error) => {
            tracing::error!(%error, "cannot claim a preview");
            false
        }
    }
}

/// Runs a claimed build inside a span naming its workspace and number, so
/// that every log line of the build carries them.
async fn run_build(
    host: &Host,
    worker: &str,
    build_id: &str,
    kind: JobKind,
    shutdown: watch::Receiver<bool>,
) {
    let _busy = host.inner.config.metrics.provisioner_busy();
    let (span, _) = build_span(host, build_id).await;
    span.in_scope(|| tracing::info!(worker = %worker, kind = %kind, "claimed a job"));
    run_build_steps(host, worker, build_id, kind, shutdown)
        .instrument(span)
        .await;
}

/// The span every log line of a build is written in (its workspace as
/// `owner/name`, its number and id), and the build as read for it.
pub(crate) async fn build_span(host: &Host, build_id: &str) -> (tracing::Span, Option<Build>) {
    match host.inner.store.build_by_id(build_id).await {
        Ok(build) => (
            tracing::info_span!(
                "build",
                workspace = %format_args!("{}/{}", build.owner_name, build.workspace_name),
                build_number = build.number,
                build_id = %build_id,
            ),
            Some(build),
        ),
        Err(error) => {
            let span = tracing::info_span!("build", build_id = %build_id);
            span.in_scope(|| tracing::error!(%error, "cannot read the build"));
            (span, None)
        }
    }
}

/// Counts a build's run that ended `status`, begun at `started` (Unix ms).
pub(crate) fn count_build_end(host: &Host, build: &Build, status: BuildStatus, started: i64) {
    let seconds = (host.now_ms() - started).max(0) as f64 / 1000.0;
    host.inner.config.metrics.build_ended(
        build.transition.as_str(),
        status.as_str(),
        build.reason.as_str(),
        seconds,
    );
}

/// The steps of one claimed build, to its recorded end.
async fn run_build_steps(
    host: &Host,
    worker: &str,
    build_id: &str,
    kind: JobKind,
    shutdown: watch::Receiver<bool>,
) {
    let server = host.inner.config.server_id.clone();
    let (interruptions, cancel) = Interruptions::start(
        host,
        build_id,
        shutdown,
        Some((server.clone(), worker.to_string())),
    );
    let job = match ServerJob::load(host, build_id, &server, Some(worker), kind).await {
        Ok(job) => job,
        Err(failure) => {
            interruptions.end();
            host.build_log()
                .note(
                    build_id,
                    &LogStage::CLEANUP,
                    LogLevel::Error,
                    &failure.message,
                )
                .await;
            if let Err(error) = host
                .inner
                .store
                .finish_build(build_id, BuildStatus::Failed, Some(&failure.message))
                .await
            {
                tracing::error!(build = %build_id, %error, "cannot record the end of a build");
            }
            return;
        }
    };
    let result = match job.inputs().await {
        Ok(inputs) => {
            let interrupts = abode_runner::Interrupts {
                cancel,
                lease_lost: interruptions.lease_lost(),
            };
            abode_runner::run_job(&runner_config(&host.inner.config), &job, inputs, interrupts)
                .await
        }
        Err(failure) => Err(failure),
    };
    let result = result.map_err(|failure| {
        if failure.kind == abode_runner::FailureKind::Canceled && interruptions.by_shutdown() {
            abode_runner::Failure::failed(
                "interrupted by a server shutdown; the Terraform state was kept",
            )
        } else {
            failure
        }
    });
    let lease_lost = interruptions.by_lost_lease()
        || matches!(&result, Err(failure) if failure.message.starts_with(abode_runner::LEASE_LOST));
    interruptions.end();
    if lease_lost {
        // The build is another provisioner's now, or was failed by another
        // server: its end is theirs to record. What this server did is told.
        let what = match &result {
            Ok(_) => "its apply ran to its end".to_string(),
            // Terraform's own message can run long: its first sentence.
            Err(failure) => first_sentence(&failure.message),
        };
        host.build_log()
            .note(
                build_id,
                &LogStage::CLEANUP,
                LogLevel::Warn,
                &format!(
                    "the server {server} lost its lease on this build while running it ({what}); \
                     its Terraform no longer runs, and the workspace's state lock is released if \
                     this run still held it"
                ),
            )
            .await;
        tracing::warn!(build = %build_id, "lost the lease on a build; its end is not recorded by this server");
        return;
    }
    // An end that could not be recorded is logged; the lease runs out and
    // another server fails the build.
    let _ = job.finish(abode_protocol::Outcome::of(result)).await;
}

/// The first sentence of a message (up to its first ". "), at most 300
/// characters.
fn first_sentence(message: &str) -> String {
    let sentence = message.split(". ").next().unwrap_or(message);
    sentence.chars().take(300).collect()
}

/// The embedded provisioners' machine: the server's own data dir.
pub(crate) fn runner_config(config: &abode_control::Config) -> RunnerConfig {
    RunnerConfig {
        work_dir: config.work_dir(),
        volumes_dir: config.volumes_dir(),
        process_logs_dir: config.process_logs_dir(),
        provider_mirror: config.provider_mirror.clone(),
        agent_binary: config.agent_binary.clone(),
        ca_cert: config.ca_cert.clone(),
        terraform_env: config.terraform_env.clone(),
        cancel_grace: config.cancel_grace,
        isolation: config.terraform_isolation.clone(),
        process_supervisor: config.process_supervisor.clone(),
    }
}

/// Applies the plan JSON retention to the workspace of a build that just
/// ended; each build whose plan JSON goes says so in its log.
async fn prune_plans(host: &Host, build_id: &str) {
    let store = &host.inner.store;
    let keep = i64::try_from(host.inner.config.plan_retention).unwrap_or(i64::MAX);
    let pruned = match store.build_by_id(build_id).await {
        Ok(build) => store.prune_plan_json(&build.workspace_id, keep).await,
        Err(error) => Err(error),
    };
    match pruned {
        Ok(pruned) => {
            for id in pruned {
                host
                    .build_log()
                    .note(
                        &id,
                        &LogStage::CLEANUP,
                        LogLevel::Info,
                        &format!(
                            "the plan JSON of this build was removed: the server keeps it for the newest {keep} builds of a workspace"
                        ),
                    )
                    .await;
            }
        }
        Err(error) => tracing::error!(build = %build_id, %error, "cannot apply the plan retention"),
    }
}
