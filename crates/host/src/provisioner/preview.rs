//! One workspace's fleet preview: the version planned with the workspace's
//! own state, parameters and transition, judged by the guard exactly as a
//! build of that version would be, and **never applied**.
//!
//! It shares the build's steps (work dir, environment contract, `init`,
//! `plan -out`, the guard's judgement) but none of a build's records: no
//! build row, no log, no saved plan, no state written back. The work dir is
//! private and removed at the end; the stored state is only ever read.

use std::collections::BTreeMap;

use abode_store::{ClaimedPreview, PreviewOutcome, PreviewStatus, SystemActor, Transition};
use tokio::sync::watch;
use tracing::Instrument;

use abode_runner::command::{
    contract_env, open_process_supervisor, show_plan, TerraformCommand, WorkDirLayout,
};
use abode_runner::workdir::{self, PLAN_FILE};
use abode_runner::{Failure, LogStage};

use super::guard_step::{judge_plan, Judged};
use super::run::{storage, workspace_context, RunOf};
use super::BuildLog;
use crate::room::Host;
use abode_control::parameters::CheckKind;
use abode_control::resolve_parameters;

/// Plans and judges one claimed result and records how it ended.
pub(crate) async fn run_preview(
    host: &Host,
    claimed: &ClaimedPreview,
    shutdown: watch::Receiver<bool>,
) {
    let span = tracing::info_span!(
        "preview",
        preview_id = %claimed.preview_id,
        workspace_id = %claimed.workspace_id,
    );
    run_preview_steps(host, claimed, shutdown)
        .instrument(span)
        .await;
}

async fn run_preview_steps(host: &Host, claimed: &ClaimedPreview, shutdown: watch::Receiver<bool>) {
    let work_dir = host
        .inner
        .config
        .work_dir()
        .join(preview_dir_name(&claimed.result_id));
    let outcome = match plan_and_judge(host, claimed, shutdown.clone()).await {
        Ok(outcome) => outcome,
        Err(failure) => PreviewOutcome {
            status: PreviewStatus::Failed,
            transition: failure.transition,
            decision: None,
            report: None,
            error: Some(failure.message),
        },
    };
    workdir::remove_off_runtime(work_dir).await;
    let holder = &host.inner.config.server_id;
    if *shutdown.borrow() {
        // Interrupted by the server's shutdown, not failed: planned again
        // by whichever server takes it next.
        if let Err(error) = host
            .inner
            .store
            .requeue_previews(holder, Some(&claimed.result_id))
            .await
        {
            tracing::error!(%error, "cannot give a preview back to the queue");
        }
        return;
    }
    match host
        .inner
        .store
        .finish_preview(&claimed.result_id, holder, &outcome)
        .await
    {
        Ok(true) => {}
        Ok(false) => tracing::warn!(
            "a preview outlived its lease and was taken by another worker; its result is theirs"
        ),
        Err(error) => tracing::error!(%error, "cannot record a preview's result"),
    }
}

/// A preview's work dir, beside the builds' (cleared with theirs at start).
fn preview_dir_name(result_id: &str) -> String {
    format!("preview-{result_id}")
}

/// Why a preview has no decision, and the transition it was planned as if
/// it got that far.
struct PreviewFailure {
    transition: Option<Transition>,
    message: String,
}

impl PreviewFailure {
    fn at(transition: Transition) -> impl Fn(Failure) -> PreviewFailure {
        move |failure| PreviewFailure {
            transition: Some(transition),
            message: failure.message,
        }
    }
}

async fn plan_and_judge(
    host: &Host,
    claimed: &ClaimedPreview,
    shutdown: watch::Receiver<bool>,
) -> Result<PreviewOutcome, PreviewFailure> {
    let store = &host.inner.store;
    let early = |failure: Failure| PreviewFailure {
        transition: None,
        message: failure.message,
    };
    let preview = store
        .preview_by_id(&claimed.preview_id)
        .await
        .map_err(storage)
        .map_err(early)?;
    let workspace = store
        .workspace_by_id(&claimed.workspace_id)
        .await
        .map_err(storage)
        .map_err(early)?;
    if workspace.deleted {
        return Ok(skipped("the workspace was deleted before its turn"));
    }
    // Previewed as what its next build would be: a running workspace as a
    // start, a stopped one as a stop (one that never built as a start).
    let transition = match store
        .latest_succeeded_build(&workspace.id)
        .await
        .map_err(storage)
        .map_err(early)?
    {
        Some(build) if build.transition == Transition::Stop => Transition::Stop,
        Some(build) if build.transition == Transition::Delete => {
            return Ok(skipped("the workspace was deleted before its turn"))
        }
        _ => Transition::Start,
    };
    let failed = PreviewFailure::at(transition);
    let version = store
        .template_version_by_id(&preview.template_version_id)
        .await
        .map_err(storage)
        .map_err(&failed)?;
    let previous = &workspace.parameters;
    // The workspace's values against the version's declarations, as an
    // update to it would check them: a value the version refuses, or a new
    // required parameter, is this workspace's error.
    let (values, _) = resolve_parameters(
        &version,
        &BTreeMap::new(),
        Some(previous),
        CheckKind::Update,
    )
    .map_err(|error| failed(Failure::failed(error.to_string())))?;
    let archive = store
        .template_version_archive(&version.id)
        .await
        .map_err(storage)
        .map_err(&failed)?;
    let state = store
        .state(&workspace.id)
        .await
        .map_err(storage)
        .map_err(&failed)?;
    let config = &host.inner.config;
    let (work_dir, cli_config) = WorkDirLayout {
        base: config.work_dir(),
        build_id: preview_dir_name(&claimed.result_id),
        archive,
        state,
        provider_mirror: config.provider_mirror.clone(),
        isolation: config.terraform_isolation.clone(),
    }
    .lay_out_off_runtime()
    .await
    .map_err(&failed)?;
    // A preview has no build: the result's id stands for the build's. A
    // pool's workspace would be rebuilt by the pool, as a prebuild.
    let owner_groups = store
        .user_group_names(&workspace.owner_id)
        .await
        .map_err(storage)
        .map_err(&failed)?;
    let mut context = workspace_context(
        config,
        &workspace,
        RunOf {
            transition,
            id: &claimed.result_id,
            template_version: version.number,
            is_prebuild: workspace.owner_name == SystemActor::Prebuilds.username(),
            is_prebuild_claim: false,
            parameters: values,
        },
    );
    context.owner_groups = owner_groups;
    // The preview's own supervisor socket, for the workspace it plans on
    // (a plan asks whether the workspace's processes run); closed at the end.
    let supervisor = open_process_supervisor(
        config.process_supervisor.as_deref(),
        &work_dir,
        abode_contract::supervisor::BuildOf {
            workspace_id: workspace.id.clone(),
            agent_url: Some(context.agent_url.clone()),
            uid: None,
            adopt: Vec::new(),
        },
    )
    .await
    .map_err(&failed)?;
    context.process_supervisor = supervisor
        .as_ref()
        .map(|socket| socket.path().to_path_buf());
    let env = contract_env(&config.terraform_env, context, &cli_config);
    let terraform = |stage: LogStage, args: Vec<String>| {
        let command = TerraformCommand::<BuildLog> {
            sink: None,
            grace: config.cancel_grace,
            work_dir: &work_dir,
            env: &env,
            cancel: shutdown.clone(),
            isolation: config.terraform_isolation.as_ref(),
            timing: None,
        };
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            command.run(&stage, &args).await
        }
    };
    terraform(LogStage::INIT, to_args(&["init", "-input=false", "-json"]))
        .await
        .map_err(&failed)?;
    let plan_file = work_dir.join(PLAN_FILE);
    let plan_arg = format!("-out={}", plan_file.display());
    terraform(
        LogStage::PLAN,
        to_args(&["plan", "-input=false", "-json", &plan_arg]),
    )
    .await
    .map_err(&failed)?;
    let guard_transition = match transition {
        Transition::Stop => abode_guard::BuildIntent::Stop,
        _ => abode_guard::BuildIntent::Start,
    };
    let plan_json = show_plan(
        &work_dir,
        &env,
        &plan_file,
        config.terraform_isolation.as_ref(),
    )
    .await
    .map_err(&failed)?;
    let Judged { report } = judge_plan(
        host,
        &plan_json,
        &workspace.id,
        guard_transition,
        abode_guard::Initiator::Person,
        &[],
        Vec::new(),
    )
    .await
    .map_err(&failed)?;
    Ok(PreviewOutcome {
        status: PreviewStatus::Planned,
        transition: Some(transition),
        decision: Some(report.decision.as_str()),
        report: Some(report.to_json()),
        error: None,
    })
}

fn to_args(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| arg.to_string()).collect()
}

fn skipped(why: &str) -> PreviewOutcome {
    PreviewOutcome {
        status: PreviewStatus::Skipped,
        transition: None,
        decision: None,
        report: None,
        error: Some(why.to_string()),
    }
}
