//! The embedded provisioners: workers that claim queued jobs and run each build
//! through Terraform, and the validation of pushed templates.
//!
//! A build: unpack the template version into a private work dir, write the
//! workspace's stored state, `terraform init`, `terraform plan -out` (with
//! `-destroy` for a delete), `terraform show -json`, run the guard and keep its
//! report and the plan JSON with the build, `terraform apply` of exactly that
//! plan, store the resulting state (also when apply failed or was canceled),
//! and remove the work dir. Terraform's `-json` lines reach the build log as
//! they are printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use abode_contract::BuildContext;
use abode_guard::{Decision, Plan, RememberedProtection, Report};
use abode_store::{
    Build, BuildStatus, JobKind, NewAgent, NewLogLine, NewProtection, SavedPlan, StoreError,
    Transition, Workspace,
};
use abode_terraform::run::{self, Invocation, Outcome, OutputLine, RunError, Stream};
use abode_terraform::supervise::{self, RunRecord};
use tokio::sync::{mpsc, watch};

use crate::recovery::{self, StateKept};
use crate::workdir::{self, PLAN_FILE, STATE_FILE, TEMPLATE_SUBDIR};
use crate::{archive, secrets, Control, ControlError};

/// How long an idle worker sleeps before looking at the queue again even
/// without a wake-up (jobs queued by another process).
const IDLE_POLL: Duration = Duration::from_secs(2);

pub(crate) async fn worker(control: Control, name: String, mut shutdown: watch::Receiver<bool>) {
    loop {
        if *shutdown.borrow() {
            break;
        }
        match control.inner.store.claim_job(&name).await {
            Ok(Some(job)) => {
                tracing::info!(worker = %name, build = %job.build_id, kind = %job.kind, "claimed a job");
                run_build(&control, &job.build_id, job.kind, shutdown.clone()).await;
            }
            Ok(None) => {
                tokio::select! {
                    _ = control.inner.jobs_queued.notified() => {}
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

/// Ends held builds nobody confirmed in time; runs until shutdown.
pub(crate) async fn expiry_sweeper(control: Control, mut shutdown: watch::Receiver<bool>) {
    let every = (control.inner.config.confirmation_timeout / 10)
        .clamp(Duration::from_millis(250), Duration::from_secs(10));
    loop {
        if *shutdown.borrow() {
            break;
        }
        control.expire_held_builds().await;
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// Why a build did not succeed: the status it ends in and the one-line reason.
struct Failure {
    status: BuildStatus,
    message: String,
    /// The summary of the last error diagnostic Terraform printed, as it
    /// printed it, when a Terraform run failed.
    diagnostic: Option<String>,
}

impl Failure {
    fn failed(message: impl Into<String>) -> Failure {
        Failure {
            status: BuildStatus::Failed,
            message: message.into(),
            diagnostic: None,
        }
    }
}

/// Terraform's own refusal of a saved plan made on another state (its
/// diagnostic summary, matched whole).
const TERRAFORM_STALE_PLAN: &str = "Saved plan is stale";

/// How a build that did not fail ended.
enum Ended {
    Applied,
    /// The guard asks for confirmation: nothing applied, the plan is saved.
    Held(SavedPlan),
}

const STALE_PLAN_MESSAGE: &str =
    "the workspace changed since this plan was made; start the build again";

/// How often a running build looks for a cancel recorded in the database
/// (by another server process, or before this worker registered the build).
const CANCEL_POLL: Duration = Duration::from_secs(1);

/// What interrupts a running build: a cancel asked of this process (through
/// `Control::running`), a cancel recorded in the database by anyone, at any
/// time since the build was queued, or this server shutting down.
pub(crate) struct Interruptions {
    control: Control,
    build_id: String,
    shutdown_watch: tokio::task::JoinHandle<()>,
    request_watch: tokio::task::JoinHandle<()>,
}

impl Interruptions {
    /// Registers the build's cancel switch and starts watching; the receiver
    /// turns true when the build must stop.
    pub(crate) fn start(
        control: &Control,
        build_id: &str,
        mut shutdown: watch::Receiver<bool>,
    ) -> (Interruptions, watch::Receiver<bool>) {
        let (switch, cancel) = watch::channel(false);
        if let Ok(mut running) = control.inner.running.lock() {
            running.insert(build_id.to_string(), switch.clone());
        }
        let shutdown_switch = switch.clone();
        let shutdown_watch = tokio::spawn(async move {
            while !*shutdown.borrow_and_update() {
                if shutdown.changed().await.is_err() {
                    return;
                }
            }
            let _ = shutdown_switch.send(true);
        });
        let (store, id) = (control.inner.store.clone(), build_id.to_string());
        let request_watch = tokio::spawn(async move {
            loop {
                match store.cancel_requested(&id).await {
                    Ok(true) => {
                        let _ = switch.send(true);
                        return;
                    }
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(build = %id, %error, "cannot read whether a cancel was requested")
                    }
                }
                tokio::time::sleep(CANCEL_POLL).await;
            }
        });
        let interruptions = Interruptions {
            control: control.clone(),
            build_id: build_id.to_string(),
            shutdown_watch,
            request_watch,
        };
        (interruptions, cancel)
    }

    /// Whether it was this server's shutdown that interrupted the build.
    pub(crate) fn by_shutdown(&self) -> bool {
        self.shutdown_watch.is_finished()
    }

    pub(crate) fn end(self) {
        self.shutdown_watch.abort();
        self.request_watch.abort();
        if let Ok(mut running) = self.control.inner.running.lock() {
            running.remove(&self.build_id);
        }
    }
}

async fn run_build(
    control: &Control,
    build_id: &str,
    kind: JobKind,
    shutdown: watch::Receiver<bool>,
) {
    let (interruptions, cancel) = Interruptions::start(control, build_id, shutdown);

    let mut build_run = BuildRun {
        control: control.clone(),
        build_id: build_id.to_string(),
        work_dir: control.inner.config.work_dir().join(build_id),
        cancel,
        env: Vec::new(),
        state_digest: String::new(),
    };
    let result = if kind == JobKind::ApplySavedPlan {
        build_run.apply_saved_plan().await
    } else {
        build_run.execute().await
    };
    build_run.save_state().await;
    if kind == JobKind::ApplySavedPlan {
        // Single use: whatever the apply did, this plan is never applied again.
        if let Err(error) = control.inner.store.delete_saved_plan(build_id).await {
            tracing::error!(build = %build_id, %error, "cannot delete a saved plan");
        }
    }
    let (status, error, held) = match result {
        Ok(Ended::Applied) => (BuildStatus::Succeeded, None, None),
        Ok(Ended::Held(plan)) => (BuildStatus::AwaitingConfirmation, None, Some(plan)),
        Err(mut failure) => {
            if failure.status == BuildStatus::Canceled && interruptions.by_shutdown() {
                failure = Failure::failed(
                    "interrupted by a server shutdown; the Terraform state was kept",
                );
            }
            build_run.log("cleanup", "error", &failure.message).await;
            (failure.status, Some(failure.message), None)
        }
    };
    workdir::remove_off_runtime(build_run.work_dir.clone()).await;
    interruptions.end();
    match held {
        Some(plan) => control.hold_build(build_id, plan).await,
        None => {
            let done = match status {
                BuildStatus::Succeeded => "build succeeded".to_string(),
                other => format!("build {other}"),
            };
            let level = if status == BuildStatus::Succeeded {
                "info"
            } else {
                "error"
            };
            build_run.log("cleanup", level, &done).await;
            if let Err(error) = control
                .inner
                .store
                .finish_build(build_id, status, error.as_deref())
                .await
            {
                tracing::error!(build = %build_id, %error, "cannot record the end of a build");
            }
        }
    }
    prune_plans(control, build_id).await;
    control.inner.log_written.notify_waiters();
    tracing::info!(build = %build_id, status = %status, "build finished");
}

/// Applies the plan JSON retention to the workspace of a build that just
/// ended; each build whose plan JSON goes says so in its log.
async fn prune_plans(control: &Control, build_id: &str) {
    let store = &control.inner.store;
    let keep = i64::try_from(control.inner.config.plan_retention).unwrap_or(i64::MAX);
    let pruned = match store.build_by_id(build_id).await {
        Ok(build) => store.prune_plan_json(&build.workspace_id, keep).await,
        Err(error) => Err(error),
    };
    match pruned {
        Ok(pruned) => {
            for id in pruned {
                control
                    .note(
                        &id,
                        "cleanup",
                        "info",
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

/// What a build's work dir is made of, laid out off the async runtime.
struct WorkDirLayout {
    base: PathBuf,
    build_id: String,
    archive: Vec<u8>,
    state: Option<Vec<u8>>,
    provider_mirror: Option<PathBuf>,
}

impl WorkDirLayout {
    /// The private work dir with the unpacked template, the stored state, the
    /// CLI configuration and a complete provider lock (so that `terraform
    /// init` neither warns about nor re-hashes the mirrored provider); returns
    /// the work dir and the CLI configuration's path.
    fn lay_out(self) -> Result<(PathBuf, PathBuf), Failure> {
        let work_dir = workdir::create(&self.base, &self.build_id)
            .map_err(|error| Failure::failed(format!("cannot create the work dir: {error}")))?;
        let template_dir = work_dir.join(TEMPLATE_SUBDIR);
        archive::unpack(&self.archive, &template_dir)
            .map_err(|error| Failure::failed(format!("cannot unpack the template: {error}")))?;
        if let Some(state) = &self.state {
            workdir::write_private(&template_dir.join(STATE_FILE), state)
                .map_err(|error| Failure::failed(format!("cannot write the state: {error}")))?;
        }
        let cli_config = workdir::write_cli_config(&work_dir, self.provider_mirror.as_deref())
            .map_err(Failure::failed)?;
        workdir::write_provider_lock(&template_dir, self.provider_mirror.as_deref())
            .map_err(Failure::failed)?;
        Ok((work_dir, cli_config))
    }
}

struct BuildRun {
    control: Control,
    build_id: String,
    work_dir: PathBuf,
    cancel: watch::Receiver<bool>,
    env: Vec<(String, String)>,
    /// SHA-256 of the state the build started from (a saved plan is only
    /// valid on that state).
    state_digest: String,
}

impl BuildRun {
    fn template_dir(&self) -> PathBuf {
        self.work_dir.join(TEMPLATE_SUBDIR)
    }

    async fn log(&self, stage: &str, level: &str, text: &str) {
        let line = NewLogLine {
            stage: stage.into(),
            level: level.into(),
            text: text.into(),
        };
        if let Err(error) = self
            .control
            .inner
            .store
            .append_log(&self.build_id, &line)
            .await
        {
            tracing::error!(build = %self.build_id, %error, "cannot write a build log line");
        }
        self.control.inner.log_written.notify_waiters();
    }

    fn canceled(&self) -> Result<(), Failure> {
        if *self.cancel.borrow() {
            return Err(Failure {
                status: BuildStatus::Canceled,
                message: "the build was canceled".into(),
                diagnostic: None,
            });
        }
        Ok(())
    }

    /// Everything before `terraform init`: the template unpacked in a private
    /// work dir, the workspace's state written, the CLI configuration and the
    /// environment contract.
    async fn prepare(&mut self) -> Result<(Build, Workspace), Failure> {
        let store = &self.control.inner.store;
        let config = &self.control.inner.config;
        let build = store.build_by_id(&self.build_id).await.map_err(storage)?;
        let workspace = store
            .workspace_by_id(&build.workspace_id)
            .await
            .map_err(storage)?;
        let archive_bytes = store
            .template_version_archive(&build.template_version_id)
            .await
            .map_err(storage)?;
        let state = store.state(&workspace.id).await.map_err(storage)?;
        self.state_digest = secrets::sha256_hex(state.as_deref().unwrap_or_default());
        let layout = WorkDirLayout {
            base: config.work_dir(),
            build_id: self.build_id.clone(),
            archive: archive_bytes,
            state,
            provider_mirror: config.provider_mirror.clone(),
        };
        // Unpacking up to 64 MiB and hashing the provider are blocking work.
        let (work_dir, cli_config) = tokio::task::spawn_blocking(move || layout.lay_out())
            .await
            .map_err(|error| {
                Failure::failed(format!("preparing the work dir failed: {error}"))
            })??;
        self.work_dir = work_dir;
        self.env = build_env(config, &build, &workspace, &cli_config)?;
        Ok((build, workspace))
    }

    async fn execute(&mut self) -> Result<Ended, Failure> {
        let (build, workspace) = self.prepare().await?;
        self.log(
            "setup",
            "info",
            &format!(
                "build #{} ({}) of {}/{} on template {} version {}",
                build.number,
                build.transition,
                build.owner_name,
                build.workspace_name,
                workspace.template_name,
                build.template_version
            ),
        )
        .await;
        self.canceled()?;

        self.terraform("init", &["init", "-input=false", "-json"])
            .await?;
        self.canceled()?;

        let plan_file = self.work_dir.join(PLAN_FILE);
        let plan_arg = format!("-out={}", plan_file.display());
        let mut plan_args = vec!["plan", "-input=false", "-json", plan_arg.as_str()];
        if build.transition == Transition::Delete {
            plan_args.push("-destroy");
        }
        self.terraform("plan", &plan_args).await?;
        self.canceled()?;

        let (plan, report, memory) = self.check_plan(&build, &workspace, &plan_file).await?;
        match report.decision {
            Decision::Allow => {}
            Decision::Block => {
                let message = format!(
                    "blocked by the plan guard: {}",
                    describe_changes(&report, Decision::Block)
                );
                self.control
                    .audit_system("build.blocked", &build, Some(message.clone()))
                    .await;
                return Err(Failure::failed(message));
            }
            Decision::Confirm => {
                let bytes = tokio::fs::read(&plan_file).await.map_err(|error| {
                    Failure::failed(format!("cannot read the saved plan: {error}"))
                })?;
                let digest = secrets::sha256_hex(&bytes);
                self.log(
                    "guard",
                    "warn",
                    &format!(
                        "held for confirmation: {}; nothing was applied. Review, then confirm with: abode builds confirm {}/{} {} --digest {digest}",
                        describe_changes(&report, Decision::Confirm),
                        build.owner_name,
                        build.workspace_name,
                        build.number
                    ),
                )
                .await;
                return Ok(Ended::Held(SavedPlan {
                    plan: bytes,
                    digest,
                    state_digest: self.state_digest.clone(),
                }));
            }
        }
        self.canceled()?;

        let plan_path = plan_file.display().to_string();
        self.terraform(
            "apply",
            &["apply", "-input=false", "-json", plan_path.as_str()],
        )
        .await?;

        self.after_apply(&build, &workspace, &plan, &memory).await?;
        Ok(Ended::Applied)
    }

    /// Applies the confirmed, saved plan of a held build, exactly as it was
    /// shown: no new plan is made.
    async fn apply_saved_plan(&mut self) -> Result<Ended, Failure> {
        let (build, workspace) = self.prepare().await?;
        let store = &self.control.inner.store;
        let saved = store
            .saved_plan(&self.build_id)
            .await
            .map_err(storage)?
            .ok_or_else(|| Failure::failed("the saved plan of this build is gone"))?;
        self.log(
            "setup",
            "info",
            &format!(
                "applying the saved plan {} confirmed by {}",
                saved.digest,
                build.confirmed_by.as_deref().unwrap_or("someone")
            ),
        )
        .await;
        if saved.state_digest != self.state_digest {
            return Err(Failure::failed(STALE_PLAN_MESSAGE));
        }
        self.canceled()?;
        self.terraform("init", &["init", "-input=false", "-json"])
            .await?;
        self.canceled()?;
        let plan_file = self.work_dir.join(PLAN_FILE);
        let (path, plan) = (plan_file.clone(), saved.plan.clone());
        tokio::task::spawn_blocking(move || workdir::write_private(&path, &plan))
            .await
            .map_err(|error| Failure::failed(format!("cannot write the saved plan: {error}")))?
            .map_err(|error| Failure::failed(format!("cannot write the saved plan: {error}")))?;
        let plan_path = plan_file.display().to_string();
        let applied = self
            .terraform(
                "apply",
                &["apply", "-input=false", "-json", plan_path.as_str()],
            )
            .await;
        if let Err(failure) = applied {
            let stale = failure.diagnostic.as_deref() == Some(TERRAFORM_STALE_PLAN);
            return Err(if stale {
                Failure::failed(STALE_PLAN_MESSAGE)
            } else {
                failure
            });
        }
        let plan_json = store
            .build_plan_json(&self.build_id)
            .await
            .map_err(storage)?
            .unwrap_or_default();
        let plan = abode_guard::read_plan_slice(plan_json.as_bytes())
            .map_err(|error| Failure::failed(format!("cannot read the plan: {error}")))?;
        let memory = self
            .control
            .remembered(&workspace.id)
            .await
            .map_err(internal)?;
        self.after_apply(&build, &workspace, &plan, &memory).await?;
        Ok(Ended::Applied)
    }

    /// `terraform show -json` of the saved plan, then the guard with the
    /// template's annotations and the workspace's remembered protections; the
    /// plan JSON and the report are kept with the build and the report is
    /// written to the log.
    async fn check_plan(
        &self,
        build: &Build,
        workspace: &Workspace,
        plan_file: &Path,
    ) -> Result<(Plan, Report, Vec<RememberedProtection>), Failure> {
        let show = Invocation::new(
            self.template_dir(),
            [
                "show",
                "-json",
                "-no-color",
                &plan_file.display().to_string(),
            ],
            &self.env,
        );
        let plan_json = run::capture(&show)
            .await
            .map_err(|error| Failure::failed(error.to_string()))?;
        let plan = abode_guard::read_plan_slice(&plan_json)
            .map_err(|error| Failure::failed(format!("cannot read the plan: {error}")))?;
        let transition = guard_transition(build.transition);
        let memory = self
            .control
            .remembered(&workspace.id)
            .await
            .map_err(internal)?;
        let report =
            abode_guard::evaluate(&plan, transition, &abode_guard::remembered_rules(&memory));
        let plan_text = String::from_utf8_lossy(&plan_json);
        self.control
            .inner
            .store
            .set_build_plan(&self.build_id, &plan_text, &report.to_json())
            .await
            .map_err(storage)?;
        let level = match report.decision {
            Decision::Allow => "info",
            _ => "warn",
        };
        for line in abode_guard::render_text(&report, false).lines() {
            if !line.trim().is_empty() {
                self.log("guard", level, line).await;
            }
        }
        Ok((plan, report, memory))
    }

    async fn after_apply(
        &self,
        build: &Build,
        workspace: &Workspace,
        plan: &Plan,
        memory: &[RememberedProtection],
    ) -> Result<(), Failure> {
        let store = &self.control.inner.store;
        let remembered = abode_guard::protections_after_apply(
            plan,
            guard_transition(build.transition),
            &[],
            memory,
        );
        let remembered: Vec<NewProtection> = remembered
            .into_iter()
            .map(|protection| NewProtection {
                address: protection.address,
                mode: protection.mode.as_str().to_string(),
            })
            .collect();
        store
            .replace_protections(&workspace.id, &build.id, &remembered)
            .await
            .map_err(storage)?;
        match build.transition {
            Transition::Start => {
                // The state was just stored from this file; unreadable now, the
                // workspace would silently lose its agents.
                let state = tokio::fs::read(self.template_dir().join(STATE_FILE))
                    .await
                    .map_err(|error| {
                        Failure::failed(format!("cannot read the state after apply: {error}"))
                    })?;
                let agents = agents_in_state(&state).map_err(|error| {
                    Failure::failed(format!("the state after apply is not valid JSON: {error}"))
                })?;
                if !agents.is_empty() {
                    let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
                    self.log(
                        "apply",
                        "info",
                        &format!("workspace agent(s): {}", names.join(", ")),
                    )
                    .await;
                }
                store
                    .replace_agents(&workspace.id, &build.id, &agents)
                    .await
                    .map_err(storage)?;
            }
            Transition::Delete => {
                store
                    .replace_agents(&workspace.id, &build.id, &[])
                    .await
                    .map_err(storage)?;
                store
                    .mark_workspace_deleted(&workspace.id)
                    .await
                    .map_err(storage)?;
            }
            Transition::Stop => {}
        }
        Ok(())
    }

    /// Stores the state Terraform left in the work dir, whatever the outcome:
    /// a failed or canceled apply may already have created or destroyed things.
    async fn save_state(&self) {
        match recovery::keep_state(&self.control, &self.build_id, &self.work_dir).await {
            StateKept::Missing | StateKept::Unchanged => {}
            StateKept::Saved => {
                self.log("cleanup", "info", "saved the Terraform state")
                    .await
            }
            StateKept::Refused(reason) => {
                tracing::error!(build = %self.build_id, %reason, "cannot save the Terraform state");
                self.log(
                    "cleanup",
                    "error",
                    &format!("cannot save the Terraform state: {reason}"),
                )
                .await;
            }
        }
    }

    /// Runs one Terraform command, streaming its lines into the log.
    async fn terraform(&self, stage: &str, args: &[&str]) -> Result<(), Failure> {
        let invocation = Invocation::new(self.template_dir(), args.iter().copied(), &self.env);
        let (sender, receiver) = mpsc::unbounded_channel::<OutputLine>();
        let grace = self.control.inner.config.cancel_grace;
        let record = RunRecord::in_dir(&self.work_dir);
        let runner = supervise::stream(&invocation, &record, sender, self.cancel.clone(), grace);
        let logger = log_output(&self.control, &self.build_id, stage, receiver, 0);
        let (outcome, last_error) = tokio::join!(runner, logger);
        match outcome {
            Ok(Outcome::Exited { success: true, .. }) => Ok(()),
            Ok(Outcome::Exited { code, .. }) => {
                let reason = match &last_error {
                    Some(error) => error.text.clone(),
                    None => format!(
                        "exit status {}",
                        code.map_or("unknown".into(), |c| c.to_string())
                    ),
                };
                Err(Failure {
                    status: BuildStatus::Failed,
                    message: format!("terraform {stage} failed: {reason}"),
                    diagnostic: last_error.and_then(|error| error.summary),
                })
            }
            Ok(Outcome::Canceled { killed }) => Err(Failure {
                diagnostic: None,
                status: BuildStatus::Canceled,
                message: if killed {
                    format!("canceled during terraform {stage}; Terraform did not stop in time and was killed")
                } else {
                    format!("canceled during terraform {stage}")
                },
            }),
            Err(error) => Err(Failure::failed(error.to_string())),
        }
    }
}

fn storage(error: StoreError) -> Failure {
    Failure::failed(format!("storage error: {error}"))
}

fn internal(error: ControlError) -> Failure {
    Failure::failed(error.to_string())
}

/// The guard is pure and has its own transition type; every stored one maps
/// to one of its kinds.
fn guard_transition(transition: Transition) -> abode_guard::Transition {
    match transition {
        Transition::Start => abode_guard::Transition::Start,
        Transition::Stop => abode_guard::Transition::Stop,
        Transition::Delete => abode_guard::Transition::Delete,
    }
}

/// The protected changes that made the decision, in one line:
/// `abode_volume.home: replaced because ...; ...`.
fn describe_changes(report: &Report, decision: Decision) -> String {
    let described: Vec<String> = report
        .protected_changes
        .iter()
        .filter(|change| change.outcome == decision)
        .map(|change| format!("{}: {}", change.address, change.reason))
        .collect();
    if described.is_empty() {
        "protected resources would be destroyed or replaced".to_string()
    } else {
        described.join("; ")
    }
}

/// The environment of a build's Terraform runs: the environment contract
/// plus the CLI configuration.
fn build_env(
    config: &crate::Config,
    build: &Build,
    workspace: &Workspace,
    cli_config: &Path,
) -> Result<Vec<(String, String)>, Failure> {
    let parameters: BTreeMap<String, String> = serde_json::from_str(&workspace.parameters)
        .map_err(|error| {
            Failure::failed(format!(
                "the workspace's stored parameters are not an object of strings: {error}"
            ))
        })?;
    let context = BuildContext {
        workspace_id: workspace.id.clone(),
        workspace_name: workspace.name.clone(),
        transition: build.transition,
        build_id: build.id.clone(),
        owner_id: workspace.owner_id.clone(),
        owner_name: workspace.owner_name.clone(),
        owner_email: workspace.owner_email.clone(),
        owner_full_name: String::new(),
        owner_groups: Vec::new(),
        template_id: workspace.template_id.clone(),
        template_name: workspace.template_name.clone(),
        template_version: build.template_version.to_string(),
        is_prebuild: false,
        is_prebuild_claim: false,
        agent_url: config.access_url.clone(),
        agent_token: None,
        agent_binary: config.agent_binary.clone(),
        volumes_dir: config.volumes_dir(),
        process_logs_dir: config.process_logs_dir(),
        parameters,
        development: false,
        template_import: false,
    };
    let mut env = config.terraform_env.clone();
    env.extend(
        context
            .to_env()
            .into_iter()
            .map(|(key, value)| (key.to_string(), value)),
    );
    env.push((
        "TF_CLI_CONFIG_FILE".into(),
        cli_config.display().to_string(),
    ));
    Ok(env)
}

/// A Terraform output line as the build log shows it: the `@message` of a
/// `-json` line with its level (plus a diagnostic's detail), or the raw text.
pub(crate) fn render_line(line: &OutputLine) -> Option<(&'static str, String)> {
    let text = line.text.trim_end();
    if text.trim().is_empty() {
        return None;
    }
    if line.stream == Stream::Stdout && text.starts_with('{') {
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
            let message = value.get("@message").and_then(|m| m.as_str()).unwrap_or("");
            let level = match value
                .get("@level")
                .and_then(|l| l.as_str())
                .unwrap_or("info")
            {
                "error" => "error",
                "warn" => "warn",
                "trace" | "debug" => "debug",
                _ => "info",
            };
            let detail = value
                .pointer("/diagnostic/detail")
                .and_then(|d| d.as_str())
                .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
                .filter(|d| !d.is_empty());
            let rendered = match detail {
                Some(detail) => format!("{message}: {detail}"),
                None => message.to_string(),
            };
            if rendered.is_empty() {
                return None;
            }
            return Some((level, rendered));
        }
    }
    let level = match line.stream {
        Stream::Stderr => "error",
        Stream::Stdout => "info",
    };
    Some((level, text.to_string()))
}

/// The summary of a `-json` diagnostic line.
fn diagnostic_summary(line: &OutputLine) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(line.text.trim()).ok()?;
    value
        .pointer("/diagnostic/summary")?
        .as_str()
        .map(str::to_string)
}

/// The `abode_agent` resources of a state, with the hash of each token and
/// what the agent runs at start (`startup_script`, `dir`, `env`). The token
/// itself goes no further than this function.
pub(crate) fn agents_in_state(state: &[u8]) -> Result<Vec<NewAgent>, serde_json::Error> {
    let value = serde_json::from_slice::<serde_json::Value>(state)?;
    let mut agents = Vec::new();
    for agent in crate::state::managed_instances(&value) {
        if agent.resource_type != "abode_agent" {
            continue;
        }
        let instance = agent.object;
        let Some(token) = instance
            .pointer("/attributes/token")
            .and_then(|t| t.as_str())
        else {
            continue;
        };
        if token.is_empty() {
            continue;
        }
        let name = if agent.name.is_empty() {
            "agent"
        } else {
            agent.name
        };
        let full_name = match agent.module {
            Some(module) => format!("{module}.{name}{}", agent.index_suffix()),
            None => format!("{name}{}", agent.index_suffix()),
        };
        let text = |attribute: &str| {
            instance
                .pointer(&format!("/attributes/{attribute}"))
                .and_then(|v| v.as_str())
                .filter(|v| !v.is_empty())
                .map(String::from)
        };
        // Only string values: the agent adds them to the script's
        // environment as they are.
        let env: serde_json::Map<String, serde_json::Value> = instance
            .pointer("/attributes/env")
            .and_then(|e| e.as_object())
            .map(|env| {
                env.iter()
                    .filter(|(_, value)| value.is_string())
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect()
            })
            .unwrap_or_default();
        agents.push(NewAgent {
            name: full_name,
            token_hash: secrets::token_hash(token),
            startup_script: text("startup_script"),
            dir: text("dir"),
            env: serde_json::Value::Object(env).to_string(),
        });
    }
    Ok(agents)
}

/// The last error a Terraform run printed.
pub(crate) struct TerraformError {
    /// As the build log shows it: the build's one-line error.
    pub text: String,
    /// The diagnostic's summary, when it was a `-json` diagnostic.
    pub summary: Option<String>,
}

/// Writes Terraform's output lines into a build's log as they come, skipping
/// the first `skip` rendered lines (already logged by a server that died);
/// returns the last error, for the build's one-line error.
pub(crate) async fn log_output(
    control: &Control,
    build_id: &str,
    stage: &str,
    mut receiver: mpsc::UnboundedReceiver<OutputLine>,
    skip: usize,
) -> Option<TerraformError> {
    let mut last_error = None;
    let mut seen = 0;
    while let Some(line) = receiver.recv().await {
        let Some((level, text)) = render_line(&line) else {
            continue;
        };
        seen += 1;
        if level == "error" {
            last_error = Some(TerraformError {
                text: text.clone(),
                summary: diagnostic_summary(&line),
            });
        }
        if seen <= skip {
            continue;
        }
        if let Err(error) = control.log(build_id, stage, level, &text).await {
            tracing::error!(build = %build_id, %error, "cannot write a build log line");
        }
    }
    last_error
}

/// Checks a pushed template: safe to unpack, `terraform init` and
/// `terraform validate` pass. Returns Terraform's validation message.
pub(crate) async fn validate_template(
    control: &Control,
    archive_bytes: &[u8],
) -> Result<String, ControlError> {
    let config = &control.inner.config;
    let dir = workdir::create(
        &config.work_dir(),
        &format!("push-{}", abode_store::new_id()),
    )
    .map_err(|error| ControlError::Internal(format!("cannot create a work dir: {error}")))?;
    let result = validate_in(control, archive_bytes, &dir).await;
    workdir::remove_off_runtime(dir).await;
    result
}

async fn validate_in(
    control: &Control,
    archive_bytes: &[u8],
    dir: &Path,
) -> Result<String, ControlError> {
    let template_dir = dir.join(TEMPLATE_SUBDIR);
    let bytes = archive_bytes.to_vec();
    let target = template_dir.clone();
    tokio::task::spawn_blocking(move || archive::unpack(&bytes, &target))
        .await
        .map_err(|error| ControlError::Internal(format!("unpack task failed: {error}")))??;
    let mirror = control.inner.config.provider_mirror.clone();
    let (config_dir, lock_dir) = (dir.to_path_buf(), template_dir.clone());
    let cli_config = tokio::task::spawn_blocking(move || {
        let cli_config = workdir::write_cli_config(&config_dir, mirror.as_deref())?;
        workdir::write_provider_lock(&lock_dir, mirror.as_deref())?;
        Ok::<_, String>(cli_config)
    })
    .await
    .map_err(|error| ControlError::Internal(format!("preparing the work dir failed: {error}")))?
    .map_err(ControlError::Internal)?;
    let mut env = control.inner.config.terraform_env.clone();
    env.push((
        "TF_CLI_CONFIG_FILE".to_string(),
        cli_config.display().to_string(),
    ));
    let as_template_error = |step: &str| {
        let step = step.to_string();
        move |error: RunError| match error {
            RunError::Failed { message, .. } => {
                ControlError::InvalidTemplate(format!("terraform {step} failed: {message}"))
            }
            other => ControlError::Internal(other.to_string()),
        }
    };
    run::capture(&Invocation::new(
        &template_dir,
        ["init", "-input=false", "-no-color"],
        &env,
    ))
    .await
    .map_err(as_template_error("init"))?;
    let output = run::capture(&Invocation::new(
        &template_dir,
        ["validate", "-no-color"],
        &env,
    ))
    .await
    .map_err(as_template_error("validate"))?;
    let message = String::from_utf8_lossy(&output)
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("The configuration is valid.")
        .to_string();
    Ok(message)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn json_lines_render_as_their_message_with_level() {
        let line = |stream, text: &str| OutputLine {
            stream,
            text: text.into(),
        };
        let cases = [
            (
                line(
                    Stream::Stdout,
                    r#"{"@level":"info","@message":"terraform_data.a: Creating...","type":"apply_start"}"#,
                ),
                Some(("info", "terraform_data.a: Creating...".to_string())),
            ),
            (
                line(
                    Stream::Stdout,
                    r#"{"@level":"error","@message":"Error: boom","type":"diagnostic","diagnostic":{"severity":"error","summary":"boom","detail":"it\nbroke"}}"#,
                ),
                Some(("error", "Error: boom: it broke".to_string())),
            ),
            (
                line(Stream::Stdout, "plain text"),
                Some(("info", "plain text".to_string())),
            ),
            (
                line(Stream::Stderr, "panic: x"),
                Some(("error", "panic: x".to_string())),
            ),
            (line(Stream::Stdout, "   "), None),
        ];
        for (input, expected) in cases {
            assert_eq!(render_line(&input), expected, "{}", input.text);
        }
    }

    #[test]
    fn agent_tokens_are_read_from_state_and_only_their_hash_kept() {
        let state = br#"{"version":4,"resources":[
          {"mode":"managed","type":"abode_agent","name":"main","instances":[{"attributes":{"token":"secret-1"}}]},
          {"module":"module.m","mode":"managed","type":"abode_agent","name":"extra","instances":[{"index_key":0,"attributes":{"token":"secret-2"}}]},
          {"mode":"managed","type":"terraform_data","name":"x","instances":[{"attributes":{"token":"not-an-agent"}}]},
          {"mode":"data","type":"abode_agent","name":"d","instances":[{"attributes":{"token":"data"}}]}
        ]}"#;
        let agents = agents_in_state(state).unwrap();
        let found: Vec<(&str, String)> = agents
            .iter()
            .map(|a| (a.name.as_str(), a.token_hash.clone()))
            .collect();
        assert_eq!(
            found,
            vec![
                ("main", secrets::token_hash("secret-1")),
                ("module.m.extra[0]", secrets::token_hash("secret-2")),
            ]
        );
        assert!(agents_in_state(b"not json").is_err());
        assert_eq!(
            (
                agents[1].startup_script.as_deref(),
                agents[1].dir.as_deref(),
                agents[1].env.as_str()
            ),
            (None, None, "{}"),
            "an agent without a startup script"
        );
    }

    #[test]
    fn agent_startup_script_dir_and_env_are_read_from_state() {
        let state = br#"{"version":4,"resources":[
          {"mode":"managed","type":"abode_agent","name":"main","instances":[{"attributes":{
            "token":"secret-1","startup_script":"echo hi > marker","dir":"/home/dev",
            "env":{"GREETING":"hello","ODD":7}}}]},
          {"mode":"managed","type":"abode_agent","name":"empty","instances":[{"attributes":{
            "token":"secret-2","startup_script":"","dir":null,"env":null}}]}
        ]}"#;
        let agents = agents_in_state(state).unwrap();
        let found: Vec<(&str, Option<&str>, Option<&str>, &str)> = agents
            .iter()
            .map(|a| {
                (
                    a.name.as_str(),
                    a.startup_script.as_deref(),
                    a.dir.as_deref(),
                    a.env.as_str(),
                )
            })
            .collect();
        assert_eq!(
            found,
            vec![
                (
                    "main",
                    Some("echo hi > marker"),
                    Some("/home/dev"),
                    r#"{"GREETING":"hello"}"#
                ),
                ("empty", None, None, "{}"),
            ]
        );
    }
}
