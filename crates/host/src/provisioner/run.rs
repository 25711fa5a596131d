//! What a build's or a preview's run is made of on the server: its
//! environment contract from the workspace and the build, and how the
//! server's own failures are told as a run's.

use std::collections::BTreeMap;

use abode_contract::BuildContext;
use abode_runner::{Failure, FailureKind};
use abode_store::{Build, BuildStatus, JobKind, PrebuildPart, StoreError, Transition, Workspace};

use abode_control::ControlError;

pub(super) fn storage(error: StoreError) -> Failure {
    Failure::failed(format!("storage error: {error}"))
}

pub(super) fn internal(error: ControlError) -> Failure {
    Failure::failed(error.to_string())
}

/// The environment contract of a build: the workspace, the build (with
/// what it is to the prebuilt workspaces, as its job carries it) and its
/// parameter values.
pub(super) fn build_context(
    config: &abode_control::Config,
    build: &Build,
    prebuild: Option<PrebuildPart>,
    workspace: &Workspace,
) -> Result<BuildContext, Failure> {
    let parameters = build
        .parameters
        .as_ref()
        .unwrap_or(&workspace.parameters)
        .clone();
    let mut context = workspace_context(
        config,
        workspace,
        RunOf {
            transition: build.transition,
            id: &build.id,
            template_version: build.template_version,
            // A pool's own builds (made, replaced, deleted by the `prebuilds`
            // actor) run as prebuilds; the claim build is the one that hands
            // the workspace to its person.
            is_prebuild: prebuild == Some(PrebuildPart::Pool),
            is_prebuild_claim: prebuild == Some(PrebuildPart::Claim),
            parameters,
        },
    );
    // A rename is planned and applied under the name the workspace takes
    // if it succeeds: what the template makes of the name is in its plan.
    if let Some(new_name) = &build.rename_to {
        context.workspace_name = new_name.clone();
    }
    Ok(context)
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
    config: &abode_control::Config,
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
        // Read from the store by the caller (`ServerJob::inputs`, a preview).
        owner_groups: Vec::new(),
        template_id: workspace.template_id.clone(),
        template_name: workspace.template_name.clone(),
        template_version: run.template_version.to_string(),
        is_prebuild: run.is_prebuild,
        is_prebuild_claim: run.is_prebuild_claim,
        agent_url: config.access_url.clone(),
        agent_token: None,
        agent_binary: config.agent_binary.clone(),
        agent_ca_cert: config.ca_cert.clone(),
        volumes_dir: config.volumes_dir(),
        process_logs_dir: config.process_logs_dir(),
        // The run's own socket, opened for this workspace where it runs.
        process_supervisor: None,
        parameters: run.parameters,
        development: false,
        template_import: false,
    }
}

/// The status a build that did not succeed ends in.
pub(crate) fn failed_status(kind: FailureKind) -> BuildStatus {
    match kind {
        FailureKind::Failed => BuildStatus::Failed,
        FailureKind::Canceled => BuildStatus::Canceled,
    }
}

/// What a stored job asks the runner to do.
pub(crate) fn run_kind(kind: JobKind) -> abode_runner::JobKind {
    match kind {
        JobKind::Build => abode_runner::JobKind::Build,
        JobKind::ApplySavedPlan => abode_runner::JobKind::ApplySavedPlan,
    }
}
