//! The state backend every build's Terraform uses (Terraform's `http`
//! backend; `abode_control::state_backend` says why), and a person's unlock
//! of a workspace whose lock a lost holder kept.
//!
//! Terraform authenticates with HTTP basic auth: the build's id and the
//! run's secret. A run that does not hold its workspace's state lock is
//! answered 409 on reads and writes, and 423 with the holder's lock
//! information (which Terraform prints) on a lock.

use std::collections::HashMap;

use abode_host::LockAnswer;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;

use crate::{ApiError, AppState, Authenticated};

/// A state, like a daemon's upload: up to 64 MiB of JSON, and some room.
const MAX_STATE_BODY: usize = 96 * 1024 * 1024;
/// Terraform's lock information: a few hundred bytes.
const MAX_LOCK_BODY: usize = 64 * 1024;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/builds/:build/state",
            get(read_state)
                .post(write_state)
                .layer(DefaultBodyLimit::max(MAX_STATE_BODY)),
        )
        .route(
            "/builds/:build/state/lock",
            post(lock).layer(DefaultBodyLimit::max(MAX_LOCK_BODY)),
        )
        .route(
            "/builds/:build/state/unlock",
            post(unlock).layer(DefaultBodyLimit::max(MAX_LOCK_BODY)),
        )
        .route("/workspaces/:workspace/unlock", post(unlock_workspace))
}

/// The run's secret, checked against its build's state lock before any
/// body is read: a caller who is not that run is answered at once.
struct HeldBy(String);

#[axum::async_trait]
impl FromRequestParts<AppState> for HeldBy {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Path(build) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::bad_request("not a build's state"))?;
        let secret = run_secret(&parts.headers, &build)?;
        state.host.holds_state_lock(&build, &secret).await?;
        Ok(HeldBy(secret))
    }
}

/// Whether a request is Terraform's (its body has this module's limit).
pub(crate) fn is_state_path(path: &str) -> bool {
    path.starts_with("/api/v1/builds/") || path.starts_with("/builds/")
}

/// The run's secret, from basic auth whose user is the build's id.
fn run_secret(headers: &HeaderMap, build: &str) -> Result<String, ApiError> {
    let unauthorized = || {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the state backend takes a build's id and its run's secret (basic auth)",
        )
    };
    let value = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .ok_or_else(unauthorized)?;
    let encoded = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))
        .ok_or_else(unauthorized)?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|_| unauthorized())?;
    let decoded = String::from_utf8(decoded).map_err(|_| unauthorized())?;
    let (user, secret) = decoded.split_once(':').ok_or_else(unauthorized)?;
    if user != build || secret.is_empty() {
        return Err(unauthorized());
    }
    Ok(secret.to_string())
}

async fn read_state(
    State(state): State<AppState>,
    Path(build): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let secret = run_secret(&headers, &build)?;
    match state.host.backend_state(&build, &secret).await? {
        Some(bytes) => Ok((
            StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            bytes,
        )
            .into_response()),
        // Terraform starts a new state.
        None => Ok(StatusCode::NO_CONTENT.into_response()),
    }
}

async fn write_state(
    State(state): State<AppState>,
    Path(build): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    HeldBy(secret): HeldBy,
    body: Bytes,
) -> Result<Response, ApiError> {
    let lock_id = query.get("ID").map(String::as_str);
    state
        .host
        .backend_put_state(&build, &secret, lock_id, body.to_vec())
        .await?;
    Ok(StatusCode::OK.into_response())
}

async fn lock(
    State(state): State<AppState>,
    Path(build): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    // Not `HeldBy`: a run refused a lock is told who holds it (423); the
    // body is a few hundred bytes at most.
    let secret = run_secret(&headers, &build)?;
    match state.host.backend_lock(&build, &secret, &body).await? {
        LockAnswer::Locked => Ok(StatusCode::OK.into_response()),
        LockAnswer::Held(info) => Ok((
            StatusCode::LOCKED,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            info,
        )
            .into_response()),
    }
}

async fn unlock(
    State(state): State<AppState>,
    Path(build): Path<String>,
    HeldBy(secret): HeldBy,
    body: Bytes,
) -> Result<Response, ApiError> {
    state.host.backend_unlock(&build, &secret, &body).await?;
    Ok(StatusCode::OK.into_response())
}

async fn unlock_workspace(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
    Json(request): Json<abode_sdk::requests::Unlock>,
) -> Result<Response, ApiError> {
    let lock = state
        .host
        .unlock_workspace(&caller, &workspace, request.build)
        .await?;
    Ok(Json(abode_sdk::UnlockedAnswer {
        unlocked: abode_sdk::Unlocked {
            build_number: lock.build_number,
            holder: lock.holder,
            taken_at: Some(lock.taken_at),
            lost_at: lock.lost_at,
        },
    })
    .into_response())
}
