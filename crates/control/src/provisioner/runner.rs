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
use std::path::{Path, PathBuf};
use std::time::Duration;

use abode_contract::BuildContext;
use abode_store::{JobKind, SavedPlan, Transition};
use tokio::sync::watch;

use super::guard_step::show_plan;
use super::run::{contract_env, Ended, Failure, TerraformCommand, WorkDirLayout};
use crate::recovery::StateKept;
use crate::secrets;
use crate::workdir::{self, PLAN_FILE, STATE_FILE, TEMPLATE_SUBDIR};

/// Terraform's own refusal of a saved plan made on another state (its
/// diagnostic summary, matched whole).
const TERRAFORM_STALE_PLAN: &str = "Saved plan is stale";

/// What a build whose saved plan no longer fits the workspace ends with.
pub const STALE_PLAN_MESSAGE: &str =
    "the workspace changed since this plan was made; start the build again";

/// How often the state file is looked at while Terraform may write it, for
/// a host that keeps states as they are written.
const STATE_WATCH: Duration = Duration::from_millis(500);

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
    /// Offers the state Terraform wrote; `last`: after the last command.
    fn keep_state(&self, state: Vec<u8>, last: bool) -> impl Future<Output = StateKept> + Send;
    /// The apply succeeded and its state was offered: record what it made
    /// (protections remembered, agents, a deleted workspace).
    fn applied(&self, state: Vec<u8>) -> impl Future<Output = Result<(), Failure>> + Send;
    /// Whether states are offered while Terraform writes them, not only at
    /// the end: a daemon's machine may die with its disk.
    fn keeps_state_as_written(&self) -> bool {
        false
    }
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

/// Runs one job to its end on this machine: the work dir laid out, `init`,
/// `plan`, the host's verdict, `apply`; or, for a confirmed plan, `init` and
/// `apply` of exactly that plan. Whatever happened, the state Terraform left
/// is offered to the host and the work dir removed once it was kept (a
/// state not kept stays in it, and the log says where).
pub async fn run_job<H: BuildHost>(
    config: &RunnerConfig,
    host: &H,
    mut inputs: JobInputs,
    cancel: watch::Receiver<bool>,
) -> Result<Ended, Failure> {
    let state_digest = secrets::sha256_hex(inputs.state.as_deref().unwrap_or_default());
    let work_dir = config.work_dir.join(&inputs.build_id);
    let saved_plan = inputs.saved_plan.take();
    let layout = WorkDirLayout {
        base: config.work_dir.clone(),
        build_id: inputs.build_id.clone(),
        archive: std::mem::take(&mut inputs.archive),
        state: inputs.state.take(),
        provider_mirror: config.provider_mirror.clone(),
    };
    let mut run = Run {
        config,
        host,
        work_dir: work_dir.clone(),
        env: Vec::new(),
        cancel,
    };
    let result = match layout.lay_out_off_runtime().await {
        Err(failure) => Err(failure),
        Ok((_, cli_config)) => {
            run.env = contract_env(
                &config.terraform_env,
                local_context(config, inputs.context),
                &cli_config,
            );
            match (inputs.kind, saved_plan) {
                (JobKind::ApplySavedPlan, Some(plan)) => run.apply_saved(plan).await,
                (JobKind::ApplySavedPlan, None) => {
                    Err(Failure::failed("the saved plan of this build is gone"))
                }
                (JobKind::Build, _) => run.plan_and_apply(inputs.transition, state_digest).await,
            }
        }
    };
    if run.offer_last_state().await {
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
}

impl<H: BuildHost> Run<'_, H> {
    fn template_dir(&self) -> PathBuf {
        self.work_dir.join(TEMPLATE_SUBDIR)
    }

    fn state_file(&self) -> PathBuf {
        self.template_dir().join(STATE_FILE)
    }

    fn canceled(&self) -> Result<(), Failure> {
        if *self.cancel.borrow() {
            return Err(Failure {
                status: abode_store::BuildStatus::Canceled,
                message: "the build was canceled".into(),
                diagnostic: None,
            });
        }
        Ok(())
    }

    async fn terraform(&self, stage: &str, args: &[&str]) -> Result<(), Failure> {
        let command = TerraformCommand {
            sink: Some(self.host),
            grace: self.config.cancel_grace,
            work_dir: &self.work_dir,
            env: &self.env,
            cancel: self.cancel.clone(),
        };
        if !self.host.keeps_state_as_written() {
            return command.run(stage, args).await;
        }
        let (stop, stopped) = watch::channel(false);
        let watching = watch_state(self.host, self.state_file(), stopped);
        let running = async {
            let result = command.run(stage, args).await;
            let _ = stop.send(true);
            result
        };
        let (result, ()) = tokio::join!(running, watching);
        result
    }

    async fn plan_and_apply(
        &mut self,
        transition: Transition,
        state_digest: String,
    ) -> Result<Ended, Failure> {
        self.canceled()?;
        self.terraform("init", &["init", "-input=false", "-json"])
            .await?;
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
        match self.host.judge(plan_json, plan.clone()).await? {
            Verdict::Block(message) => Err(Failure::failed(message)),
            Verdict::Hold => {
                let digest = secrets::sha256_hex(&plan);
                Ok(Ended::Held(SavedPlan {
                    plan,
                    digest,
                    state_digest,
                }))
            }
            Verdict::Apply => {
                self.canceled()?;
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
        self.terraform("init", &["init", "-input=false", "-json"])
            .await?;
        self.canceled()?;
        let plan_file = self.work_dir.join(PLAN_FILE);
        let path = plan_file.clone();
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
        self.after_apply().await
    }

    /// The host records what a successful apply made (agents, protections)
    /// from the state Terraform wrote; a remote host uploads it first, so
    /// that the server reads it from its own store.
    async fn after_apply(&self) -> Result<Ended, Failure> {
        let state = tokio::fs::read(self.state_file()).await.map_err(|error| {
            Failure::failed(format!("cannot read the state after apply: {error}"))
        })?;
        self.host.applied(state).await?;
        Ok(Ended::Applied)
    }

    /// Offers the state Terraform left in the work dir, whatever the outcome:
    /// a failed or canceled apply may already have created or destroyed
    /// things. False when it was not kept (the work dir must stay).
    async fn offer_last_state(&self) -> bool {
        let path = self.state_file();
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
        match self.host.keep_state(state, true).await {
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

/// Offers the state file to the host each time it changes, until `stop`:
/// Terraform rewrites it as resources are made, so a machine that dies in
/// the middle of an apply has still handed over what was made.
async fn watch_state<H: BuildHost>(host: &H, path: PathBuf, mut stop: watch::Receiver<bool>) {
    let mut offered: Option<Vec<u8>> = read_whole_state(&path).await;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(STATE_WATCH) => {}
            _ = stop.changed() => return,
        }
        let Some(state) = read_whole_state(&path).await else {
            continue;
        };
        if offered.as_ref() == Some(&state) {
            continue;
        }
        // A refusal (an older serial, say) is not retried: the last offer,
        // after the run, is the one that tells.
        let _ = host.keep_state(state.clone(), false).await;
        offered = Some(state);
    }
}

/// The state file if it is whole JSON (Terraform may be writing it).
async fn read_whole_state(path: &Path) -> Option<Vec<u8>> {
    let bytes = tokio::fs::read(path).await.ok()?;
    serde_json::from_slice::<serde_json::Value>(&bytes).ok()?;
    Some(bytes)
}
