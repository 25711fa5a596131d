//! A build's run where Terraform runs, whoever handed out the job.
//!
//! The embedded provisioners and the external daemons (`abode provisioner
//! start`) run a build with this one sequence, so that a build is the same
//! wherever it runs: the same work dir, environment contract, provider
//! mirror and Terraform commands. What differs is where the job's records
//! live, and that is the [`BuildHost`]: for an embedded worker the server's
//! own control plane (`on_server.rs`), for a daemon an HTTP client of the
//! server (`abode-provisionerd`). Whoever the host is, **the server
//! decides**: the runner hands it the plan and only applies when the host's
//! [`Verdict`] says so.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use abode_contract::{BuildContext, Transition};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::command::{
    contract_env, show_plan, Ended, Failure, FailureKind, TerraformCommand, WorkDirLayout,
};
use crate::state_backend::StateBackend;
use crate::workdir::{self, ERRORED_STATE_FILE, PLAN_FILE, STATE_FILE, TEMPLATE_SUBDIR};

/// Terraform's own refusal of a saved plan made on another state (its
/// diagnostic summary, matched whole).
const TERRAFORM_STALE_PLAN: &str = "Saved plan is stale";

/// What a build whose saved plan no longer fits the workspace ends with.
pub const STALE_PLAN_MESSAGE: &str =
    "the workspace changed since this plan was made; start the build again";

/// What a job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobKind {
    /// A whole build: plan, guard, apply.
    Build,
    /// The apply of the confirmed, saved plan of a held build.
    ApplySavedPlan,
}

impl JobKind {
    /// Its name where it is stored and on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Build => "build",
            JobKind::ApplySavedPlan => "apply_saved_plan",
        }
    }
}

impl std::fmt::Display for JobKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A job kind none of [`JobKind`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown job kind `{0}`")]
pub struct UnknownJobKind(pub String);

impl std::str::FromStr for JobKind {
    type Err = UnknownJobKind;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        [JobKind::Build, JobKind::ApplySavedPlan]
            .into_iter()
            .find(|kind| kind.as_str() == value)
            .ok_or_else(|| UnknownJobKind(value.chars().take(64).collect()))
    }
}

/// The saved binary plan of a build the guard held. Secret: it leaves the
/// machine only for the server that judged it.
#[derive(Clone, PartialEq, Eq)]
pub struct HeldPlan {
    pub plan: Vec<u8>,
    /// SHA-256 of `plan`.
    pub digest: String,
    /// SHA-256 of the workspace state the plan was made from.
    pub state_digest: String,
}

impl std::fmt::Debug for HeldPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldPlan")
            .field("digest", &self.digest)
            .field("state_digest", &self.state_digest)
            .finish_non_exhaustive()
    }
}

/// What became of a state a run offered its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateKept {
    /// The work dir has no state file (nothing was ever written).
    Missing,
    /// The stored state is byte for byte the same.
    Unchanged,
    Saved,
    /// Not stored, with the reason: unreadable, or not a successor of the
    /// stored state (another lineage, an older serial).
    Refused(String),
    /// Not stored now (the host could not store it): worth offering again.
    Unavailable(String),
}

/// Lowercase hex SHA-256 of `bytes`: how plans and states are named.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Where a build's log lines go.
pub trait LogSink: Send + Sync {
    fn log(&self, stage: &str, level: &str, text: &str) -> impl Future<Output = ()> + Send;
}

/// The side of a build that keeps its records and makes its decisions.
pub trait BuildHost: LogSink {
    /// The guard's verdict on the saved plan (`plan_json` is `terraform show
    /// -json` of it, `plan` the binary plan file).
    fn judge(
        &self,
        plan_json: Vec<u8>,
        plan: Vec<u8>,
    ) -> impl Future<Output = Result<Verdict, Failure>> + Send;
    /// Offers a state Terraform could not hand to the state backend (its
    /// `errored.tfstate`, written when the server stayed unreachable).
    /// `secret` is the run's: the state is stored only while the run holds
    /// the workspace's state lock.
    fn keep_state(
        &self,
        state: Vec<u8>,
        last: bool,
        secret: &str,
    ) -> impl Future<Output = StateKept> + Send;
    /// The apply succeeded and Terraform stored its state through the
    /// backend: record what it made (protections remembered, agents, a
    /// deleted workspace) from the stored state.
    fn applied(&self) -> impl Future<Output = Result<(), Failure>> + Send;
    /// Whether this provisioner still holds the build's lease: looked at
    /// before the plan is judged and before it is applied, so that a holder
    /// that was frozen and woke up after another took the build over does
    /// neither.
    fn holds_lease(&self) -> impl Future<Output = bool> + Send {
        std::future::ready(true)
    }
    /// The run's Terraform ended: the workspace's state lock, taken for this
    /// run, is given back (`state_backend.rs`).
    fn release_state_lock(&self, backend: &StateBackend) -> impl Future<Output = ()> + Send;
}

/// What a build whose provisioner lost its lease ends with, before `step`.
pub const LEASE_LOST: &str = "this provisioner lost its lease on the build";

fn lease_lost(step: &str) -> Failure {
    Failure::failed(format!("{LEASE_LOST} before {step}; nothing was applied"))
}

/// What the host decided about a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Apply,
    /// Nothing applied; the plan waits for a person's confirmation.
    Hold,
    /// The build fails with this message.
    Block(String),
}

/// Everything a run needs from the job, fetched by the host.
pub struct JobInputs {
    pub build_id: String,
    pub kind: JobKind,
    pub transition: Transition,
    /// The template version's archive.
    pub archive: Vec<u8>,
    /// The workspace's stored state.
    pub state: Option<Vec<u8>>,
    /// The environment contract; its directories and agent binary are the
    /// runner's own ([`RunnerConfig`]).
    pub context: BuildContext,
    /// The confirmed plan of an [`JobKind::ApplySavedPlan`] job.
    pub saved_plan: Option<Vec<u8>>,
    /// How its Terraform reaches the state backend, with the run's secret.
    pub state_backend: StateBackend,
    /// A confirmed plan held before Abode was the state backend: applied
    /// against the stored state laid out in the work dir, as it was planned.
    pub local_state: bool,
}

/// Only sizes: a state and a plan may hold secrets.
impl std::fmt::Debug for JobInputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobInputs")
            .field("build_id", &self.build_id)
            .field("kind", &self.kind)
            .field("transition", &self.transition)
            .field("archive_bytes", &self.archive.len())
            .field("state_bytes", &self.state.as_ref().map(Vec::len))
            .field("saved_plan_bytes", &self.saved_plan.as_ref().map(Vec::len))
            .finish_non_exhaustive()
    }
}

/// The machine a runner runs on: where work dirs, volumes and the provider
/// mirror are, and what of its environment Terraform gets.
#[derive(Clone)]
pub struct RunnerConfig {
    pub work_dir: PathBuf,
    pub volumes_dir: PathBuf,
    pub process_logs_dir: PathBuf,
    pub provider_mirror: Option<PathBuf>,
    pub agent_binary: Option<PathBuf>,
    pub terraform_env: Vec<(String, String)>,
    pub cancel_grace: Duration,
}

/// The environment's names only: its values may be credentials.
impl std::fmt::Debug for RunnerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .terraform_env
            .iter()
            .map(|(name, _)| name.as_str())
            .collect();
        f.debug_struct("RunnerConfig")
            .field("work_dir", &self.work_dir)
            .field("volumes_dir", &self.volumes_dir)
            .field("process_logs_dir", &self.process_logs_dir)
            .field("provider_mirror", &self.provider_mirror)
            .field("agent_binary", &self.agent_binary)
            .field("terraform_env", &names)
            .field("cancel_grace", &self.cancel_grace)
            .finish()
    }
}

/// What stops a run: a cancel (or a shutdown) stops any Terraform command;
/// a lost lease stops `init` and `plan`, and no apply starts after it, but
/// an apply under way runs to its end (a half-done apply is worse than a
/// finished one, and the state lock the run still holds is the fence).
pub struct Interrupts {
    pub cancel: watch::Receiver<bool>,
    pub lease_lost: watch::Receiver<bool>,
}

/// Runs one job to its end on this machine: the work dir laid out, `init`,
/// `plan`, the host's verdict, `apply`; or, for a confirmed plan, `init` and
/// `apply` of exactly that plan. Whatever happened, the state Terraform left
/// is offered to the host and the work dir removed once it was kept (a
/// state not kept stays in it, and the log says where).
pub async fn run_job<H: BuildHost>(
    config: &RunnerConfig,
    host: &H,
    mut inputs: JobInputs,
    interrupts: Interrupts,
) -> Result<Ended, Failure> {
    let state_digest = sha256_hex(inputs.state.as_deref().unwrap_or_default());
    let work_dir = config.work_dir.join(&inputs.build_id);
    let saved_plan = inputs.saved_plan.take();
    // The state is the backend's: none is written into the work dir (but
    // for a plan made before there was one).
    let local_state = inputs.local_state;
    let layout = WorkDirLayout {
        base: config.work_dir.clone(),
        build_id: inputs.build_id.clone(),
        archive: std::mem::take(&mut inputs.archive),
        state: if local_state {
            inputs.state.take()
        } else {
            None
        },
        provider_mirror: config.provider_mirror.clone(),
    };
    let backend = inputs.state_backend.clone();
    let mut run = Run {
        config,
        host,
        work_dir: work_dir.clone(),
        env: Vec::new(),
        cancel: interrupts.cancel,
        lease_lost: interrupts.lease_lost,
        local_state,
        secret: inputs.state_backend.secret.clone(),
    };
    let laid_out = match layout.lay_out_off_runtime().await {
        Ok((dir, cli_config)) => backend
            .write(&dir, &dir.join(TEMPLATE_SUBDIR), !local_state)
            .map(|()| cli_config)
            .map_err(|error| {
                Failure::failed(format!(
                    "cannot write the state backend's settings: {error}"
                ))
            }),
        Err(failure) => Err(failure),
    };
    let result = match laid_out {
        Err(failure) => Err(failure),
        Ok(cli_config) => {
            run.env = contract_env(
                &config.terraform_env,
                local_context(config, inputs.context),
                &cli_config,
            );
            if !local_state {
                run.env.extend(backend.terraform_env());
            }
            match (inputs.kind, saved_plan) {
                (JobKind::ApplySavedPlan, Some(plan)) => run.apply_saved(plan).await,
                (JobKind::ApplySavedPlan, None) => {
                    Err(Failure::failed("the saved plan of this build is gone"))
                }
                (JobKind::Build, _) => run.plan_and_apply(inputs.transition, state_digest).await,
            }
        }
    };
    let kept = run.offer_last_state().await;
    // Whatever happened, no Terraform of this run runs any more.
    host.release_state_lock(&backend).await;
    // Only this run's: a build queued again (its plan never judged) may be
    // running here again already, in a work dir of the same name.
    if kept && backend.is_run_of(&work_dir) {
        workdir::remove_off_runtime(work_dir).await;
    }
    result
}

/// The contract with this machine's directories and agent binary.
fn local_context(config: &RunnerConfig, mut context: BuildContext) -> BuildContext {
    context.volumes_dir = config.volumes_dir.clone();
    context.process_logs_dir = config.process_logs_dir.clone();
    context.agent_binary = config.agent_binary.clone();
    context
}

struct Run<'a, H> {
    config: &'a RunnerConfig,
    host: &'a H,
    work_dir: PathBuf,
    env: Vec<(String, String)>,
    cancel: watch::Receiver<bool>,
    lease_lost: watch::Receiver<bool>,
    local_state: bool,
    /// The run's state backend secret.
    secret: String,
}

impl<H: BuildHost> Run<'_, H> {
    fn template_dir(&self) -> PathBuf {
        self.work_dir.join(TEMPLATE_SUBDIR)
    }

    /// Where Terraform writes the state it could not hand to the backend
    /// (or, for a plan made before there was one, all of it).
    fn errored_state_file(&self) -> PathBuf {
        let name = if self.local_state {
            STATE_FILE
        } else {
            ERRORED_STATE_FILE
        };
        self.template_dir().join(name)
    }

    fn canceled(&self) -> Result<(), Failure> {
        if *self.cancel.borrow() {
            return Err(Failure {
                kind: FailureKind::Canceled,
                message: "the build was canceled".into(),
                diagnostic: None,
            });
        }
        Ok(())
    }

    /// After `init`: the state backend Terraform set up is Abode's. A
    /// template that brought its own (a `.tf.json` file, an override file of
    /// its own, a version pushed before backends were refused) would keep
    /// the state where Abode never sees it: the build fails, nothing applied.
    async fn check_backend(&self) -> Result<(), Failure> {
        if self.local_state {
            return Ok(());
        }
        let path = self.template_dir().join(".terraform").join(STATE_FILE);
        let kind = tokio::fs::read(&path)
            .await
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            .and_then(|value| {
                value
                    .pointer("/backend/type")
                    .and_then(|kind| kind.as_str())
                    .map(str::to_string)
            });
        match kind.as_deref() {
            Some("http") => Ok(()),
            other => Err(Failure::failed(format!(
                "the template replaces Abode's state backend ({}): Abode keeps every workspace's \
                 state itself; remove the template's backend or cloud block",
                other.unwrap_or("none set up")
            ))),
        }
    }

    async fn terraform(&self, stage: &str, args: &[&str]) -> Result<(), Failure> {
        if stage == "apply" {
            let command = TerraformCommand {
                sink: Some(self.host),
                grace: self.config.cancel_grace,
                work_dir: &self.work_dir,
                env: &self.env,
                cancel: self.cancel.clone(),
            };
            return command.run(stage, args).await;
        }
        // Before an apply, a lost lease stops Terraform like a cancel.
        let (switch, either) = watch::channel(*self.cancel.borrow() || *self.lease_lost.borrow());
        let (mut cancel, mut lost) = (self.cancel.clone(), self.lease_lost.clone());
        let forward = tokio::spawn(async move {
            loop {
                let changed = tokio::select! {
                    changed = cancel.changed() => changed,
                    changed = lost.changed() => changed,
                };
                if changed.is_err() {
                    return;
                }
                if *cancel.borrow() || *lost.borrow() {
                    let _ = switch.send(true);
                    return;
                }
            }
        });
        let command = TerraformCommand {
            sink: Some(self.host),
            grace: self.config.cancel_grace,
            work_dir: &self.work_dir,
            env: &self.env,
            cancel: either,
        };
        let result = command.run(stage, args).await;
        forward.abort();
        if *self.lease_lost.borrow() && !*self.cancel.borrow() {
            return Err(lease_lost(&format!("terraform {stage} ended")));
        }
        result
    }

    async fn plan_and_apply(
        &mut self,
        transition: Transition,
        state_digest: String,
    ) -> Result<Ended, Failure> {
        self.canceled()?;
        self.terraform("init", &["init", "-input=false", "-json", "-no-color"])
            .await?;
        self.check_backend().await?;
        self.canceled()?;
        let plan_file = self.work_dir.join(PLAN_FILE);
        let plan_arg = format!("-out={}", plan_file.display());
        let mut plan_args = vec!["plan", "-input=false", "-json", plan_arg.as_str()];
        if transition == Transition::Delete {
            plan_args.push("-destroy");
        }
        self.terraform("plan", &plan_args).await?;
        self.canceled()?;
        let plan_json = show_plan(&self.template_dir(), &self.env, &plan_file).await?;
        let plan = tokio::fs::read(&plan_file)
            .await
            .map_err(|error| Failure::failed(format!("cannot read the saved plan: {error}")))?;
        if !self.host.holds_lease().await {
            return Err(lease_lost("its plan was judged"));
        }
        match self.host.judge(plan_json, plan.clone()).await? {
            Verdict::Block(message) => Err(Failure::failed(message)),
            Verdict::Hold => {
                let digest = sha256_hex(&plan);
                Ok(Ended::Held(HeldPlan {
                    plan,
                    digest,
                    state_digest,
                }))
            }
            Verdict::Apply => {
                self.canceled()?;
                if !self.host.holds_lease().await {
                    return Err(lease_lost("its plan was applied"));
                }
                let plan_path = plan_file.display().to_string();
                self.terraform(
                    "apply",
                    &["apply", "-input=false", "-json", plan_path.as_str()],
                )
                .await?;
                self.after_apply().await
            }
        }
    }

    /// Applies the confirmed, saved plan of a held build, exactly as it was
    /// shown: no new plan is made.
    async fn apply_saved(&mut self, plan: Vec<u8>) -> Result<Ended, Failure> {
        self.canceled()?;
        self.terraform("init", &["init", "-input=false", "-json", "-no-color"])
            .await?;
        self.check_backend().await?;
        self.canceled()?;
        let plan_file = self.work_dir.join(PLAN_FILE);
        let path = plan_file.clone();
        tokio::task::spawn_blocking(move || workdir::write_private(&path, &plan))
            .await
            .map_err(|error| Failure::failed(format!("cannot write the saved plan: {error}")))?
            .map_err(|error| Failure::failed(format!("cannot write the saved plan: {error}")))?;
        if !self.host.holds_lease().await {
            return Err(lease_lost("the confirmed plan was applied"));
        }
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
        self.after_apply().await
    }

    /// The host records what a successful apply made (agents, protections)
    /// from the state Terraform stored through the backend.
    async fn after_apply(&self) -> Result<Ended, Failure> {
        if self.local_state {
            // The state is in the work dir: stored first, then read back.
            let state = tokio::fs::read(self.errored_state_file())
                .await
                .map_err(|error| {
                    Failure::failed(format!("cannot read the state after apply: {error}"))
                })?;
            if let StateKept::Refused(reason) | StateKept::Unavailable(reason) =
                self.host.keep_state(state, true, &self.secret).await
            {
                return Err(Failure::failed(format!(
                    "the state after the apply was not stored: {reason}"
                )));
            }
        }
        self.host.applied().await?;
        Ok(Ended::Applied)
    }

    /// Offers the state Terraform could not hand to the backend, if it left
    /// one (a failed or canceled apply may already have created or
    /// destroyed things). False when it was not kept (the work dir must
    /// stay).
    async fn offer_last_state(&self) -> bool {
        let path = self.errored_state_file();
        let read = tokio::task::spawn_blocking(move || std::fs::read(path)).await;
        let state = match read {
            Ok(Ok(state)) => state,
            Ok(Err(error)) if error.kind() == std::io::ErrorKind::NotFound => return true,
            Ok(Err(error)) => {
                self.refused(&format!("cannot read it: {error}")).await;
                return false;
            }
            Err(error) => {
                self.refused(&format!("cannot read it: {error}")).await;
                return false;
            }
        };
        match self.host.keep_state(state, true, &self.secret).await {
            StateKept::Missing | StateKept::Unchanged => true,
            StateKept::Saved => {
                self.host
                    .log("cleanup", "info", "saved the Terraform state")
                    .await;
                true
            }
            StateKept::Refused(reason) | StateKept::Unavailable(reason) => {
                self.refused(&reason).await;
                false
            }
        }
    }

    async fn refused(&self, reason: &str) {
        tracing::error!(%reason, "cannot save the Terraform state");
        self.host
            .log(
                "cleanup",
                "error",
                &format!(
                    "cannot save the Terraform state: {reason}; it is kept in {}",
                    self.work_dir.display()
                ),
            )
            .await;
    }
}
