//! Routes of the prebuild pools (docs/api.md, "Prebuilds"): their status,
//! and pausing or resuming their reconciliation.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use crate::{ApiError, AppState, Authenticated};

/// The routes of this module, merged into `/api/v1`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/prebuilds", get(status))
        .route("/prebuilds/pause", post(pause))
        .route("/prebuilds/resume", post(resume))
}

#[derive(Deserialize)]
struct StatusQuery {
    template: Option<String>,
}

async fn status(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: Result<Query<StatusQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<axum::response::Response, ApiError> {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let pools = state
        .control
        .prebuilds()
        .status(&caller, query.template.as_deref())
        .await?;
    Ok(Json(pools).into_response())
}

async fn pause(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
) -> Result<axum::response::Response, ApiError> {
    state.control.prebuilds().set_paused(&caller, true).await?;
    Ok((
        StatusCode::OK,
        Json(abode_sdk::PrebuildsPaused { paused: true }),
    )
        .into_response())
}

async fn resume(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
) -> Result<axum::response::Response, ApiError> {
    state.control.prebuilds().set_paused(&caller, false).await?;
    Ok((
        StatusCode::OK,
        Json(abode_sdk::PrebuildsPaused { paused: false }),
    )
        .into_response())
}
