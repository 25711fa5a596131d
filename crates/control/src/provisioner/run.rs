//! One build's run: the work dir laid out, the environment contract, and
//! the steps of a build (prepare, init, plan, guard, apply or hold, the
//! state stored) as methods of [`BuildRun`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use abode_contract::BuildContext;
use abode_guard::{Decision, Plan, RememberedProtection};
use abode_store::{
    Build, BuildReason, BuildStatus, NewLogLine, NewProtection, SavedPlan, StoreError, Transition,
    Workspace,
};
use abode_terraform::run::{Invocation, Outcome, OutputLine};
use abode_terraform::supervise::{self, RunRecord};
use tokio::sync::{mpsc, watch};

use super::guard_step::{describe_changes, guard_transition};
use super::output::log_output;
use crate::agents::agents_in_state;
use crate::recovery::{self, StateKept};
use crate::workdir::{self, PLAN_FILE, STATE_FILE, TEMPLATE_SUBDIR};
use crate::{archive, secrets, Control, ControlError};

/// Why a build did not succeed: the status it ends in and the one-line reason.
pub(super) struct Failure {
    pub(super) status: BuildStatus,
    pub(super) message: String,
    /// The summary of the last error diagnostic Terraform printed, as it
    /// printed it, when a Terraform run failed.
    pub(super) diagnostic: Option<String>,
}

impl Failure {
    pub(super) fn failed(message: impl Into<String>) -> Failure {
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
pub(super) enum Ended {
    Applied,
    /// The guard asks for confirmation: nothing applied, the plan is saved.
    Held(SavedPlan),
}

const STALE_PLAN_MESSAGE: &str =
    "the workspace changed since this plan was made; start the build again";

/// What a build's (or a preview's) work dir is made of, laid out off the
/// async runtime.
pub(super) struct WorkDirLayout {
    pub(super) base: PathBuf,
    /// The work dir's name under `base`.
    pub(super) build_id: String,
    pub(super) archive: Vec<u8>,
    pub(super) state: Option<Vec<u8>>,
    pub(super) provider_mirror: Option<PathBuf>,
}

impl WorkDirLayout {
    /// The private work dir with the unpacked template, the stored state, the
    /// CLI configuration and a complete provider lock (so that `terraform
    /// init` neither warns about nor re-hashes the mirrored provider); returns
    /// the work dir and the CLI configuration's path.
    pub(super) fn lay_out(self) -> Result<(PathBuf, PathBuf), Failure> {
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

    /// [`WorkDirLayout::lay_out`] on a blocking thread: unpacking up to
    /// 64 MiB and hashing the provider are blocking work.
    pub(super) async fn lay_out_off_runtime(self) -> Result<(PathBuf, PathBuf), Failure> {
        tokio::task::spawn_blocking(move || self.lay_out())
            .await
            .map_err(|error| Failure::failed(format!("preparing the work dir failed: {error}")))?
    }
}

pub(super) struct BuildRun {
    pub(super) control: Control,
    pub(super) build_id: String,
    pub(super) work_dir: PathBuf,
    pub(super) cancel: watch::Receiver<bool>,
    pub(super) env: Vec<(String, String)>,
    /// SHA-256 of the state the build started from (a saved plan is only
    /// valid on that state).
    pub(super) state_digest: String,
}

impl BuildRun {
    pub(super) fn template_dir(&self) -> PathBuf {
        self.work_dir.join(TEMPLATE_SUBDIR)
    }

    pub(super) async fn log(&self, stage: &str, level: &str, text: &str) {
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

    pub(super) fn canceled(&self) -> Result<(), Failure> {
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
    pub(super) async fn prepare(&mut self) -> Result<(Build, Workspace), Failure> {
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
        let (work_dir, cli_config) = layout.lay_out_off_runtime().await?;
        self.work_dir = work_dir;
        let context = build_context(config, &build, &workspace)?;
        self.env = contract_env(config, context, &cli_config);
        Ok((build, workspace))
    }

    pub(super) async fn execute(&mut self) -> Result<Ended, Failure> {
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
    pub(super) async fn apply_saved_plan(&mut self) -> Result<Ended, Failure> {
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

    pub(super) async fn after_apply(
        &self,
        build: &Build,
        workspace: &Workspace,
        plan: &Plan,
        memory: &[RememberedProtection],
    ) -> Result<(), Failure> {
        let store = &self.control.inner.store;
        let remembered =
            abode_guard::protections_after_apply(plan, guard_transition(build), &[], memory);
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
    /// Stores the state Terraform left; false when it could not, and the work
    /// dir, which holds it, must be kept.
    pub(super) async fn save_state(&self) -> bool {
        match recovery::keep_state(&self.control, &self.build_id, &self.work_dir).await {
            StateKept::Missing | StateKept::Unchanged => true,
            StateKept::Saved => {
                self.log("cleanup", "info", "saved the Terraform state")
                    .await;
                true
            }
            StateKept::Refused(reason) => {
                tracing::error!(build = %self.build_id, %reason, "cannot save the Terraform state");
                self.log(
                    "cleanup",
                    "error",
                    &format!(
                        "cannot save the Terraform state: {reason}; it is kept in {}",
                        self.work_dir.display()
                    ),
                )
                .await;
                false
            }
        }
    }

    /// Runs one Terraform command, streaming its lines into the log.
    pub(super) async fn terraform(&self, stage: &str, args: &[&str]) -> Result<(), Failure> {
        let command = TerraformCommand {
            control: &self.control,
            work_dir: &self.work_dir,
            env: &self.env,
            cancel: self.cancel.clone(),
            build_id: Some(&self.build_id),
        };
        command.run(stage, args).await
    }
}

/// One Terraform command of a build or a preview, in the template dir of
/// `work_dir`, its lines written to the build's log (a preview keeps only
/// the last error), stopped by `cancel`.
pub(super) struct TerraformCommand<'a> {
    pub(super) control: &'a Control,
    pub(super) work_dir: &'a Path,
    pub(super) env: &'a [(String, String)],
    pub(super) cancel: watch::Receiver<bool>,
    pub(super) build_id: Option<&'a str>,
}

impl TerraformCommand<'_> {
    pub(super) async fn run(self, stage: &str, args: &[&str]) -> Result<(), Failure> {
        let invocation = Invocation::new(
            self.work_dir.join(TEMPLATE_SUBDIR),
            args.iter().copied(),
            self.env,
        );
        let (sender, receiver) = mpsc::unbounded_channel::<OutputLine>();
        let grace = self.control.inner.config.cancel_grace;
        let record = RunRecord::in_dir(self.work_dir);
        let runner = supervise::stream(&invocation, &record, sender, self.cancel, grace);
        let logger = log_output(self.control, self.build_id, stage, receiver, 0);
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

pub(super) fn storage(error: StoreError) -> Failure {
    Failure::failed(format!("storage error: {error}"))
}

pub(super) fn internal(error: ControlError) -> Failure {
    Failure::failed(error.to_string())
}

/// The environment contract of a build: the workspace, the build and its
/// parameter values.
fn build_context(
    config: &crate::Config,
    build: &Build,
    workspace: &Workspace,
) -> Result<BuildContext, Failure> {
    let given = build.parameters.as_deref().unwrap_or(&workspace.parameters);
    let parameters: BTreeMap<String, String> = serde_json::from_str(given).map_err(|error| {
        Failure::failed(format!(
            "the workspace's stored parameters are not an object of strings: {error}"
        ))
    })?;
    Ok(workspace_context(
        config,
        workspace,
        RunOf {
            transition: build.transition,
            id: &build.id,
            template_version: build.template_version,
            // A pool's own builds (made, replaced, deleted by the `prebuilds`
            // actor) run as prebuilds; the claim build is the one that hands
            // the workspace to its person.
            is_prebuild: build.reason == BuildReason::Prebuild,
            is_prebuild_claim: build.reason == BuildReason::PrebuildClaim,
            parameters,
        },
    ))
}

/// What a run of Terraform on a workspace is, for its environment contract.
pub(super) struct RunOf<'a> {
    pub(super) transition: Transition,
    /// The build's id (a preview's result id stands for it).
    pub(super) id: &'a str,
    pub(super) template_version: i64,
    pub(super) is_prebuild: bool,
    pub(super) is_prebuild_claim: bool,
    pub(super) parameters: BTreeMap<String, String>,
}

/// The environment contract of a run on `workspace`: the same for a build
/// and for a preview of one.
pub(super) fn workspace_context(
    config: &crate::Config,
    workspace: &Workspace,
    run: RunOf<'_>,
) -> BuildContext {
    BuildContext {
        workspace_id: workspace.id.clone(),
        workspace_name: workspace.name.clone(),
        transition: run.transition,
        build_id: run.id.to_string(),
        owner_id: workspace.owner_id.clone(),
        owner_name: workspace.owner_name.clone(),
        owner_email: workspace.owner_email.clone(),
        owner_full_name: String::new(),
        owner_groups: Vec::new(),
        template_id: workspace.template_id.clone(),
        template_name: workspace.template_name.clone(),
        template_version: run.template_version.to_string(),
        is_prebuild: run.is_prebuild,
        is_prebuild_claim: run.is_prebuild_claim,
        agent_url: config.access_url.clone(),
        agent_token: None,
        agent_binary: config.agent_binary.clone(),
        volumes_dir: config.volumes_dir(),
        process_logs_dir: config.process_logs_dir(),
        parameters: run.parameters,
        development: false,
        template_import: false,
    }
}

/// The environment of a build's (or a preview's) Terraform runs: the
/// server's Terraform environment, the environment contract and the CLI
/// configuration.
pub(super) fn contract_env(
    config: &crate::Config,
    context: BuildContext,
    cli_config: &Path,
) -> Vec<(String, String)> {
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
    env
}
