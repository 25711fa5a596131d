//! Workspaces: creating, listing and reading them, their protections, and
//! what is left of one after `delete --orphan` (its resources, its state).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;

use abode_control::WorkspaceQuery;

use crate::extract::parse_json;
use crate::pages::{ok, page_answer, ApiResult};
use crate::views::{build_view, protection_view, workspace_view, WorkspaceView};
use crate::{ApiError, AppState, Authenticated};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/workspaces", get(list_workspaces).post(create_workspace))
        .route("/templates/:name/estimate", post(estimate_create))
        .route("/workspaces/:workspace", get(get_workspace))
        .route("/workspaces/:workspace/orphan", post(orphan_workspace))
        .route(
            "/workspaces/:workspace/unsaved/scan",
            post(request_unsaved_scan),
        )
        .route("/workspaces/:workspace/scripts", get(workspace_scripts))
        .route(
            "/workspaces/:workspace/scripts/log",
            get(workspace_script_log),
        )
        .route("/workspaces/:workspace/rename", post(rename_workspace))
        .route("/workspaces/:workspace/restart", post(restart_workspace))
        .route("/workspaces/:workspace/move", post(move_workspace))
        .route("/workspaces/:workspace/state", get(workspace_state))
        .route(
            "/workspaces/:workspace/protections",
            get(list_protections).delete(release_protection),
        )
}

#[derive(Deserialize)]
struct ListQuery {
    #[serde(default)]
    all: Option<bool>,
    #[serde(default)]
    deleted: Option<bool>,
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    template: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

async fn create_workspace(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: abode_sdk::requests::NewWorkspace = parse_json(body)?;
    // Values go to the door as received: it checks them against the
    // template version's declarations and answers every problem at once.
    let parameters = body.parameters;
    let (view, build) = state
        .control
        .workspaces()
        .create_adopting(
            &caller,
            &body.name,
            &body.template,
            body.preset.as_deref(),
            parameters,
            &body.adopt,
        )
        .await?;
    ok(
        StatusCode::CREATED,
        abode_sdk::CreatedWorkspace {
            workspace: workspace_view(&view),
            build: build_view(&build),
        },
    )
}

async fn estimate_create(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(template): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: abode_sdk::requests::EstimateCreate = parse_json(body)?;
    let estimate = state
        .control
        .builds()
        .estimate_create(&caller, &template, body.preset.as_deref(), &body.parameters)
        .await?;
    ok(StatusCode::OK, crate::views::estimate_view(&estimate))
}

async fn list_workspaces(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let status = query
        .status
        .as_deref()
        .map(str::parse::<abode_control::WorkspaceStatus>)
        .transpose()?;
    let page = state
        .control
        .workspaces()
        .list(
            &caller,
            &WorkspaceQuery {
                all: query.all.unwrap_or(false),
                include_deleted: query.deleted.unwrap_or(false),
                owner: query.owner,
                template: query.template,
                status,
                after: query.after,
                limit: query.limit,
            },
        )
        .await?;
    let workspaces: Vec<WorkspaceView> = page.items.iter().map(workspace_view).collect();
    page_answer("workspaces", workspaces, page.next)
}

/// The scripts of the workspace's agents, with their latest run.
async fn workspace_scripts(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    let scripts = state
        .control
        .workspaces()
        .scripts(&caller, &workspace)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::WorkspaceScriptsAnswer { scripts },
    )
}

#[derive(Deserialize)]
struct ScriptLogQuery {
    agent: String,
    script: String,
}

/// The end of the output of a script's latest run.
async fn workspace_script_log(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
    query: Result<Query<ScriptLogQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) = query.map_err(|error| {
        ApiError::bad_request(format!(
            "give the agent and the script: ?agent=AGENT&script=NAME ({error})"
        ))
    })?;
    let log = state
        .control
        .workspaces()
        .script_log(&caller, &workspace, &query.agent, &query.script)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::ScriptLog {
            agent: query.agent,
            display_name: query.script,
            log,
        },
    )
}

/// Asks the workspace's agent for a fresh report of unsaved work.
async fn request_unsaved_scan(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    state
        .control
        .workspaces()
        .request_unsaved_scan(&caller, &workspace)
        .await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn get_workspace(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    let view = state.control.workspaces().get(&caller, &workspace).await?;
    let apps = state
        .gateway
        .apps()
        .workspace_app_views(&view.workspace)
        .await?
        .iter()
        .map(crate::views::app_view)
        .collect();
    let unsaved = state.control.workspaces().unsaved(&view.workspace).await?;
    let disk = state
        .control
        .workspaces()
        .disk_usage(&view.workspace)
        .await?;
    let template = state
        .control
        .templates()
        .template(&view.workspace.template_name)
        .await?;
    let declared = state
        .control
        .agents()
        .workspace_watches(&view.workspace.id)
        .await?;
    let metadata = state.gateway.live().workspace(
        &view.workspace.id,
        &declared,
        state.control.config().clock.now_ms(),
    );
    ok(
        StatusCode::OK,
        abode_sdk::WorkspaceAnswer {
            workspace: abode_sdk::Workspace {
                template_deprecation: crate::views::deprecation_view(&template),
                ..workspace_view(&view)
            },
            apps,
            unsaved,
            disk,
            metadata,
        },
    )
}

async fn list_protections(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    let protections = state
        .control
        .workspace_builds()
        .protections(&caller, &workspace)
        .await?;
    let protections: Vec<abode_sdk::Protection> = protections.iter().map(protection_view).collect();
    ok(StatusCode::OK, abode_sdk::ProtectionsAnswer { protections })
}

#[derive(Deserialize)]
struct ReleaseQuery {
    #[serde(default)]
    address: Option<String>,
}

async fn orphan_workspace(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    let orphaned = state
        .control
        .workspaces()
        .orphan(&caller, &workspace)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::Orphaned {
            workspace: abode_sdk::OrphanedWorkspace {
                id: orphaned.workspace.id,
                name: orphaned.workspace.name,
                owner: orphaned.workspace.owner_name,
                deleted: orphaned.workspace.deleted,
            },
            resources: orphaned.resources,
        },
    )
}

/// A rename: the build of the workspace's current transition planned
/// under the new name (held like any build when its plan would replace a
/// protected resource); the workspace takes the name when it succeeds.
async fn rename_workspace(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: abode_sdk::requests::RenameWorkspace = parse_json(body)?;
    let build = state
        .control
        .workspace_builds()
        .request_rename(&caller, &workspace, &body.name)
        .await?;
    ok(
        StatusCode::CREATED,
        abode_sdk::BuildAnswer {
            build: build_view(&build),
        },
    )
}

/// A move of the workspace to another host (owners; audited): its builds
/// run there from now on; its volumes' data stays where it was.
async fn move_workspace(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    // Refused before the body is parsed.
    state.host.may_move_workspaces(&caller)?;
    let body: abode_sdk::requests::MoveWorkspace = parse_json(body)?;
    let moved = state
        .host
        .move_workspace(&caller, &workspace, &body.host)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::MovedAnswer {
            moved: abode_sdk::Moved {
                from: moved.from,
                to: moved.to,
            },
        },
    )
}

/// A restart: the workspace's stop, which a start follows once it succeeds.
async fn restart_workspace(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    let build = state
        .control
        .workspace_builds()
        .request_restart(&caller, &workspace)
        .await?;
    ok(
        StatusCode::CREATED,
        abode_sdk::BuildAnswer {
            build: build_view(&build),
        },
    )
}

async fn workspace_state(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    let bytes = state
        .control
        .workspaces()
        .state(&caller, &workspace)
        .await?;
    Ok((
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        bytes,
    )
        .into_response())
}

async fn release_protection(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
    query: Result<Query<ReleaseQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let address = query
        .address
        .filter(|address| !address.trim().is_empty())
        .ok_or_else(|| {
            ApiError::bad_request("give the resource address to release: ?address=ADDRESS")
        })?;
    let released = state
        .control
        .workspace_builds()
        .release_protection(&caller, &workspace, &address)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::ReleasedAnswer {
            released: protection_view(&released),
        },
    )
}
