//! The pieces a build's run and a preview's plan share: the work dir laid
//! out, one Terraform command with its output logged, the environment
//! contract, and how a run that did not succeed is told.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use abode_contract::BuildContext;
use abode_store::{Build, BuildReason, BuildStatus, SavedPlan, StoreError, Transition, Workspace};
use abode_terraform::run::{Invocation, Outcome, OutputLine};
use abode_terraform::supervise::{self, RunRecord};
use tokio::sync::{mpsc, watch};

use super::output::log_output;
use super::runner::LogSink;
use crate::workdir::{self, STATE_FILE, TEMPLATE_SUBDIR};
use crate::{archive, ControlError};

/// Why a build did not succeed: the status it ends in and the one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub status: BuildStatus,
    pub message: String,
    /// The summary of the last error diagnostic Terraform printed, as it
    /// printed it, when a Terraform run failed.
    pub diagnostic: Option<String>,
}

impl Failure {
    pub fn failed(message: impl Into<String>) -> Failure {
        Failure {
            status: BuildStatus::Failed,
            message: message.into(),
            diagnostic: None,
        }
    }
}

/// How a build that did not fail ended.
pub enum Ended {
    Applied,
    /// The guard asks for confirmation: nothing applied, the plan is saved.
    Held(SavedPlan),
}

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

/// One Terraform command of a build or a preview, in the template dir of
/// `work_dir`, its lines written to the build's log (a preview keeps only
/// the last error), stopped by `cancel`.
pub(super) struct TerraformCommand<'a, S> {
    /// Where its lines go; none for a preview's plan, which has no log.
    pub(super) sink: Option<&'a S>,
    /// How long Terraform has to stop after an interrupt.
    pub(super) grace: std::time::Duration,
    pub(super) work_dir: &'a Path,
    pub(super) env: &'a [(String, String)],
    pub(super) cancel: watch::Receiver<bool>,
}

impl<S: LogSink> TerraformCommand<'_, S> {
    pub(super) async fn run(self, stage: &str, args: &[&str]) -> Result<(), Failure> {
        let invocation = Invocation::new(
            self.work_dir.join(TEMPLATE_SUBDIR),
            args.iter().copied(),
            self.env,
        );
        let (sender, receiver) = mpsc::unbounded_channel::<OutputLine>();
        let record = RunRecord::in_dir(self.work_dir);
        let runner = supervise::stream(&invocation, &record, sender, self.cancel, self.grace);
        let logger = log_output(self.sink, stage, receiver, 0);
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
pub(super) fn build_context(
    config: &crate::Config,
    build: &Build,
    workspace: &Workspace,
) -> Result<BuildContext, Failure> {
    let parameters = build
        .parameters
        .as_ref()
        .unwrap_or(&workspace.parameters)
        .clone();
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
    terraform_env: &[(String, String)],
    context: BuildContext,
    cli_config: &Path,
) -> Vec<(String, String)> {
    let mut env = terraform_env.to_vec();
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
