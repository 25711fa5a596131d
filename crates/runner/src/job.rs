//! A build's run where Terraform runs, whoever handed out the job.
//!
//! The embedded provisioners and the external daemons (`abode provisioner
//! start`) run a build with this one sequence, so that a build is the same
//! wherever it runs: the same work dir, environment contract, provider
//! mirror and Terraform commands. What differs is where the job's records
//! live, and that is the [`BuildHost`]: for an embedded worker the server's
//! own control plane (`abode-control`'s `ServerJob`), for a daemon an HTTP client of the
//! server (`abode-provisionerd`). Whoever the host is, **the server
//! decides**: the runner hands it the plan and only applies when the host's
//! [`Verdict`] says so.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use abode_contract::{BuildContext, Transition};
use tokio::sync::watch;

use abode_terraform::isolation::Isolation;

use crate::command::{
    contract_env, hand_over, open_process_supervisor, show_plan, TerraformCommand, WorkDirLayout,
};
use crate::host::{
    sha256_hex, BuildHost, Ended, Failure, FailureKind, HeldPlan, JobInputs, JobKind, LogLevel,
    LogStage, SnapshotOrder, StateKept, Verdict,
};
use crate::timings::Stopwatch;
use crate::turns;
use crate::workdir::{self, ERRORED_STATE_FILE, PLAN_FILE, STATE_FILE, TEMPLATE_SUBDIR};
use abode_contract::timings::{ResourcePhase, Stage};
use std::time::Instant;

/// Terraform's own refusal of a saved plan made on another state (its
/// diagnostic summary, matched whole).
const TERRAFORM_STALE_PLAN: &str = "Saved plan is stale";

/// What a build whose saved plan no longer fits the workspace ends with.
pub const STALE_PLAN_MESSAGE: &str =
    "the workspace changed since this plan was made; start the build again";

/// What a build whose provisioner lost its lease ends with, before `step`.
pub const LEASE_LOST: &str = "this provisioner lost its lease on the build";

/// How often a build looks whether the agents' shutdown scripts ended.
const SHUTDOWN_POLL: std::time::Duration = std::time::Duration::from_millis(500);

fn lease_lost(step: &str) -> Failure {
    Failure::failed(format!("{LEASE_LOST} before {step}; nothing was applied"))
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
    /// The certificate authorities (PEM) this machine trusts besides the
    /// system's (`--ca-cert`): handed to the agents it builds and to
    /// Terraform's state backend client when it speaks `https://`.
    pub ca_cert: Option<String>,
    pub terraform_env: Vec<(String, String)>,
    pub cancel_grace: Duration,
    /// The sandbox every Terraform run goes in; `None` only when the
    /// operator turned it off (`--terraform-sandbox off`).
    pub isolation: Option<Arc<Isolation>>,
    /// The machine's process supervisor socket when Terraform runs
    /// sandboxed: each run opens one of its own on it, for its workspace,
    /// which the provider is handed (`ABODE_PROCESS_SUPERVISOR`).
    pub process_supervisor: Option<PathBuf>,
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
            .field("sandboxed", &self.isolation.is_some())
            .field("process_supervisor", &self.process_supervisor)
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
    let mut cancel = interrupts.cancel.clone();
    if turns::is_taken(&work_dir) {
        host.log(
            &LogStage::INIT,
            LogLevel::Info,
            "waiting for this machine's earlier run of this build to end (its lease ran out before its plan was judged)",
        )
        .await;
    }
    let _turn = tokio::select! {
        turn = turns::take(&work_dir) => turn,
        () = async {
            // A cancel switch that is gone can no longer cancel.
            if cancel.wait_for(|canceled| *canceled).await.is_err() {
                std::future::pending::<()>().await;
            }
        } => {
            return Err(Failure {
                kind: FailureKind::Canceled,
                message: "the build was canceled".into(),
                diagnostic: None,
            });
        }
    };
    let watch = Stopwatch::new();
    let setup = Instant::now();
    let saved_plan = inputs.saved_plan.take();
    let snapshots = std::mem::take(&mut inputs.snapshots);
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
        isolation: config.isolation.clone(),
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
        watch: &watch,
    };
    // Only a build that plans writes what it forgets or imports; a
    // confirmed plan carries its own configuration.
    let forget = if inputs.kind == JobKind::Build && inputs.transition == Transition::Delete {
        std::mem::take(&mut inputs.forget)
    } else {
        Vec::new()
    };
    let imports = if inputs.kind == JobKind::Build && inputs.transition == Transition::Start {
        std::mem::take(&mut inputs.imports)
    } else {
        Vec::new()
    };
    let adopt = adopted_volumes(&imports);
    let retaining = !forget.is_empty();
    let laid_out = match layout.lay_out_off_runtime().await {
        Ok((dir, cli_config)) => retention_files(&dir.join(TEMPLATE_SUBDIR), forget, imports)
            .await
            .and_then(|()| {
                backend
                    .write(&dir, &dir.join(TEMPLATE_SUBDIR), !local_state)
                    .map_err(|error| {
                        Failure::failed(format!(
                            "cannot write the state backend's settings: {error}"
                        ))
                    })
            })
            .and_then(|()| hand_over(config.isolation.as_ref(), &dir))
            .map(|()| cli_config),
        Err(failure) => Err(failure),
    };
    // The run's own supervisor socket, for its workspace; closed when the
    // run ends.
    let mut supervisor = None;
    let laid_out = match laid_out {
        Ok(cli_config) => open_process_supervisor(
            config.process_supervisor.as_deref(),
            &work_dir,
            abode_contract::supervisor::BuildOf {
                workspace_id: inputs.context.workspace_id.clone(),
                agent_url: Some(inputs.context.agent_url.clone()),
                uid: inputs.workspace_uid,
                adopt,
            },
        )
        .await
        .map(|socket| {
            supervisor = socket;
            cli_config
        }),
        Err(failure) => Err(failure),
    };
    watch.stage(Stage::Setup, setup);
    let result = match laid_out {
        Err(failure) => Err(failure),
        Ok(cli_config) => {
            run.env = contract_env(
                &config.terraform_env,
                local_context(
                    config,
                    supervisor.as_ref().map(|socket| socket.path()),
                    inputs.context,
                ),
                &cli_config,
            );
            if !local_state {
                run.env.extend(backend.terraform_env());
                // Terraform verifies the backend's certificate itself.
                if let (true, Some(ca)) = (backend.url.starts_with("https://"), &config.ca_cert) {
                    run.env
                        .push(("TF_HTTP_CLIENT_CA_CERTIFICATE_PEM".into(), ca.clone()));
                }
            }
            match (inputs.kind, saved_plan) {
                (JobKind::ApplySavedPlan, Some(plan)) => run.apply_saved(plan, &snapshots).await,
                (JobKind::ApplySavedPlan, None) => {
                    Err(Failure::failed("the saved plan of this build is gone"))
                }
                (JobKind::Build, _) => {
                    run.plan_and_apply(inputs.transition, retaining, state_digest)
                        .await
                }
            }
        }
    };
    drop(supervisor);
    let kept = run.offer_last_state().await;
    host.timings(watch.report()).await;
    // Whatever happened, no Terraform of this run runs any more.
    host.release_state_lock(&backend).await;
    // Only this run's: a build queued again (its plan never judged) may be
    // running here again already, in a work dir of the same name.
    if kept && backend.is_run_of(&work_dir) {
        workdir::remove_off_runtime(work_dir).await;
    }
    result
}

/// The volumes (names) among a build's imports: given to its workspace.
fn adopted_volumes(imports: &[crate::retention::ImportTarget]) -> Vec<String> {
    imports
        .iter()
        .filter(|target| {
            target.address.starts_with("abode_volume.") || target.address.contains(".abode_volume.")
        })
        .map(|target| target.id.clone())
        .collect()
}

/// A retaining delete's configuration, an adopting build's imports.
async fn retention_files(
    template_dir: &std::path::Path,
    forget: Vec<String>,
    imports: Vec<crate::retention::ImportTarget>,
) -> Result<(), Failure> {
    if forget.is_empty() && imports.is_empty() {
        return Ok(());
    }
    let dir = template_dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        if !forget.is_empty() {
            crate::retention::write_forgetting_config(&dir, &forget)?;
        }
        if !imports.is_empty() {
            crate::retention::write_imports(&dir, &imports)?;
        }
        Ok::<(), crate::retention::RetentionError>(())
    })
    .await
    .map_err(|error| Failure::failed(format!("cannot write the retention settings: {error}")))?
    .map_err(|error| Failure::failed(error.to_string()))
}

/// The contract with this machine's directories and agent binary, and the
/// run's own process supervisor socket.
fn local_context(
    config: &RunnerConfig,
    supervisor: Option<&std::path::Path>,
    mut context: BuildContext,
) -> BuildContext {
    context.volumes_dir = config.volumes_dir.clone();
    context.process_logs_dir = config.process_logs_dir.clone();
    context.agent_binary = config.agent_binary.clone();
    context.agent_ca_cert = config.ca_cert.clone();
    context.process_supervisor = supervisor.map(std::path::Path::to_path_buf);
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
    /// What the run measures of its time.
    watch: &'a Stopwatch,
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

    /// A Terraform command of the build, timed as `timed` (init, plan,
    /// apply).
    async fn terraform(&self, stage: &LogStage, args: &[&str]) -> Result<(), Failure> {
        let phase = if *stage == LogStage::PLAN {
            Some(ResourcePhase::Plan)
        } else if *stage == LogStage::APPLY {
            Some(ResourcePhase::Apply)
        } else {
            None
        };
        let timing = phase.map(|phase| (self.watch, phase));
        if *stage == LogStage::APPLY {
            let command = TerraformCommand {
                sink: Some(self.host),
                grace: self.config.cancel_grace,
                work_dir: &self.work_dir,
                env: &self.env,
                cancel: self.cancel.clone(),
                isolation: self.config.isolation.as_ref(),
                timing,
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
            isolation: self.config.isolation.as_ref(),
            timing,
        };
        let result = command.run(stage, args).await;
        forward.abort();
        if *self.lease_lost.borrow() && !*self.cancel.borrow() {
            return Err(lease_lost(&format!("terraform {stage} ended")));
        }
        result
    }

    /// `terraform init`, timed, and the backend it set up checked.
    async fn init(&mut self) -> Result<(), Failure> {
        let init = Instant::now();
        let initialized = self
            .terraform(
                &LogStage::INIT,
                &["init", "-input=false", "-json", "-no-color"],
            )
            .await;
        self.watch.stage(Stage::Init, init);
        initialized?;
        self.check_backend().await?;
        self.canceled()
    }

    async fn plan_and_apply(
        &mut self,
        transition: Transition,
        retaining: bool,
        state_digest: String,
    ) -> Result<Ended, Failure> {
        self.canceled()?;
        self.init().await?;
        let planning = Instant::now();
        let plan_file = self.work_dir.join(PLAN_FILE);
        let plan_arg = format!("-out={}", plan_file.display());
        let mut plan_args = vec!["plan", "-input=false", "-json", plan_arg.as_str()];
        // A delete that retains plans in normal mode over a configuration
        // without resources: `-destroy` would ignore its `removed` blocks.
        if transition == Transition::Delete && !retaining {
            plan_args.push("-destroy");
        }
        let planned = self.terraform(&LogStage::PLAN, &plan_args).await;
        if planned.is_err() {
            self.watch.stage(Stage::Plan, planning);
        }
        planned?;
        self.canceled()?;
        let shown = show_plan(
            &self.work_dir,
            &self.env,
            &plan_file,
            self.config.isolation.as_ref(),
        )
        .await;
        self.watch.stage(Stage::Plan, planning);
        let plan_json = shown?;
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
                self.shut_down_agents().await?;
                if !self.host.holds_lease().await {
                    return Err(lease_lost("its plan was applied"));
                }
                let plan_path = plan_file.display().to_string();
                let applying = Instant::now();
                let applied = self
                    .terraform(
                        &LogStage::APPLY,
                        &["apply", "-input=false", "-json", plan_path.as_str()],
                    )
                    .await;
                self.watch.stage(Stage::Apply, applying);
                applied?;
                self.after_apply().await
            }
        }
    }

    /// Waits for the agents' shutdown scripts (the host says when they
    /// ended), hearing a cancel between its steps.
    async fn shut_down_agents(&self) -> Result<(), Failure> {
        while !self.host.agents_shut_down().await {
            self.canceled()?;
            tokio::time::sleep(SHUTDOWN_POLL).await;
        }
        self.canceled()
    }

    /// Applies the confirmed, saved plan of a held build, exactly as it was
    /// shown: no new plan is made.
    async fn apply_saved(
        &mut self,
        plan: Vec<u8>,
        snapshots: &[SnapshotOrder],
    ) -> Result<Ended, Failure> {
        self.canceled()?;
        if !snapshots.is_empty() {
            let snapshotting = Instant::now();
            let taken = self.take_snapshots(snapshots).await;
            self.watch.stage(Stage::Snapshot, snapshotting);
            taken?;
        }
        self.init().await?;
        let plan_file = self.work_dir.join(PLAN_FILE);
        let path = plan_file.clone();
        let isolation = self.config.isolation.clone();
        tokio::task::spawn_blocking(move || {
            workdir::write_private(&path, &plan)?;
            // Terraform reads it as the sandbox's user.
            match isolation {
                Some(isolation) => isolation
                    .sandbox()
                    .hand_over_one(&path)
                    .map_err(std::io::Error::other),
                None => Ok(()),
            }
        })
        .await
        .map_err(|error| Failure::failed(format!("cannot write the saved plan: {error}")))?
        .map_err(|error| Failure::failed(format!("cannot write the saved plan: {error}")))?;
        self.shut_down_agents().await?;
        if !self.host.holds_lease().await {
            return Err(lease_lost("the confirmed plan was applied"));
        }
        let plan_path = plan_file.display().to_string();
        let applying = Instant::now();
        let applied = self
            .terraform(
                &LogStage::APPLY,
                &["apply", "-input=false", "-json", plan_path.as_str()],
            )
            .await;
        self.watch.stage(Stage::Apply, applying);
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

    /// What the confirmed plan destroys is snapshotted first, or nothing is
    /// applied (`snapshot.rs`): each order's commands run, then its volume
    /// goes to the host.
    async fn take_snapshots(&self, orders: &[SnapshotOrder]) -> Result<(), Failure> {
        if orders.is_empty() {
            return Ok(());
        }
        if !self.host.holds_lease().await {
            return Err(lease_lost("its snapshots were taken"));
        }
        let isolation = self.config.isolation.as_deref();
        for order in orders {
            for command in &order.commands {
                self.canceled()?;
                let mut env = self.config.terraform_env.clone();
                env.extend(order.env.iter().cloned());
                crate::snapshot::run_command(
                    self.host,
                    isolation,
                    &self.work_dir.join("snapshot"),
                    env,
                    &order.address,
                    command,
                )
                .await?;
            }
            let Some(archive) = &order.archive else {
                continue;
            };
            self.canceled()?;
            let volume = self.config.volumes_dir.join(&archive.volume);
            if !crate::snapshot::is_plain_name(&archive.volume) || !volume.is_dir() {
                self.host
                    .log(
                        &LogStage::APPLY,
                        LogLevel::Warn,
                        &format!(
                            "snapshot of {}: its volume {:?} has no directory on this machine, so there are no files to archive",
                            order.address, archive.volume
                        ),
                    )
                    .await;
                continue;
            }
            let scratch = self.work_dir.join(format!("snapshot-{}.tar", order.index));
            let kept = self
                .host
                .keep_snapshot(order, volume, scratch.clone())
                .await;
            let _ = tokio::fs::remove_file(&scratch).await;
            kept?;
        }
        self.canceled()
    }

    /// The host records what a successful apply made (agents, protections)
    /// from the state Terraform stored through the backend.
    async fn after_apply(&self) -> Result<Ended, Failure> {
        let writing = Instant::now();
        let recorded = self.record_apply().await;
        self.watch.stage(Stage::StateWrite, writing);
        recorded
    }

    async fn record_apply(&self) -> Result<Ended, Failure> {
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
                    .log(
                        &LogStage::CLEANUP,
                        LogLevel::Info,
                        "saved the Terraform state",
                    )
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
                &LogStage::CLEANUP,
                LogLevel::Error,
                &format!(
                    "cannot save the Terraform state: {reason}; it is kept in {}",
                    self.work_dir.display()
                ),
            )
            .await;
    }
}
