//! Routes of the lifecycle settings (docs/api.md, "Lifecycle"): a
//! template's policy, a workspace's schedule, extending its deadline,
//! waking it from dormancy, and the agent's activity reports. Durations are
//! milliseconds, times Unix milliseconds.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};

use abode_sdk::requests::ExtendWorkspace;
use abode_sdk::ScheduleSpec;
use abode_sdk::TemplatePolicyPatch;

use crate::extract::parse_json;
use crate::{ApiError, AppState, Authenticated, AuthenticatedAgent};

type ApiResult = Result<axum::response::Response, ApiError>;

/// The routes of this module, merged into `/api/v1`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/templates/:name/policy",
            get(template_policy).patch(edit_template_policy),
        )
        .route(
            "/workspaces/:workspace/schedule",
            get(workspace_schedule).put(set_workspace_schedule),
        )
        .route("/workspaces/:workspace/extend", post(extend_workspace))
        .route("/workspaces/:workspace/wake", post(wake_workspace))
        .route("/agent/activity", post(agent_activity))
}

async fn template_policy(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> ApiResult {
    let policy = state
        .control
        .schedule_settings()
        .policy(&caller, &name)
        .await?;
    Ok(Json(abode_sdk::PolicyAnswer { policy }).into_response())
}

async fn edit_template_policy(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let patch: TemplatePolicyPatch = parse_json(body)?;
    let policy = state
        .control
        .schedule_settings()
        .edit_policy(&caller, &name, &patch)
        .await?;
    Ok(Json(abode_sdk::PolicyAnswer { policy }).into_response())
}

async fn workspace_schedule(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    let schedule = state
        .control
        .schedule_settings()
        .schedule(&caller, &workspace)
        .await?;
    Ok(Json(abode_sdk::ScheduleAnswer { schedule }).into_response())
}

async fn set_workspace_schedule(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let spec: ScheduleSpec = parse_json(body)?;
    let schedule = state
        .control
        .schedule_settings()
        .set_schedule(&caller, &workspace, &spec)
        .await?;
    Ok(Json(abode_sdk::ScheduleAnswer { schedule }).into_response())
}

async fn extend_workspace(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: ExtendWorkspace = parse_json(body)?;
    if body.duration_ms == 0 {
        return Err(ApiError::bad_request("duration_ms must be more than 0"));
    }
    let schedule = state
        .control
        .schedule_settings()
        .extend(&caller, &workspace, Duration::from_millis(body.duration_ms))
        .await?;
    Ok(Json(abode_sdk::ScheduleAnswer { schedule }).into_response())
}

async fn wake_workspace(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
) -> ApiResult {
    let schedule = state
        .control
        .schedule_settings()
        .wake(&caller, &workspace)
        .await?;
    Ok(Json(abode_sdk::ScheduleAnswer { schedule }).into_response())
}

async fn agent_activity(
    State(state): State<AppState>,
    AuthenticatedAgent(agent): AuthenticatedAgent,
) -> ApiResult {
    state.control.workspaces().agent_activity(&agent).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
