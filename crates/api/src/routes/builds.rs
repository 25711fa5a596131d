//! A workspace's builds: starting one, listing and reading them, their logs
//! (a long-poll), and cancelling or confirming one.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;

use abode_control::{BuildRequest, VersionChoice};
use abode_sdk::requests::ConfirmBuild;
use abode_store::BuildStatus;

use crate::extract::{list_query, parse_json, parse_number, ListQueryResult};
use crate::pages::{ok, page_answer, ApiResult};
use crate::views::{build_view, log_line_view, timings_view, BuildView};
use crate::{ApiError, AppState, Authenticated};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/workspaces/:workspace/builds",
            get(list_builds).post(create_build),
        )
        .route("/workspaces/:workspace/builds/:number", get(get_build))
        .route(
            "/workspaces/:workspace/builds/:number/timings",
            get(build_timings),
        )
        .route(
            "/workspaces/:workspace/builds/:number/logs",
            get(build_logs),
        )
        .route(
            "/workspaces/:workspace/builds/:number/cancel",
            post(cancel_build),
        )
        .route(
            "/workspaces/:workspace/builds/:number/confirm",
            post(confirm_build),
        )
}

/// Longest log long-poll.
const MAX_LOG_WAIT_SECONDS: u64 = 30;

#[derive(Deserialize)]
struct LogsQuery {
    #[serde(default)]
    after: Option<i64>,
    #[serde(default)]
    wait: Option<u64>,
}

async fn create_build(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: abode_sdk::requests::NewBuild = parse_json(body)?;
    let transition = body.transition.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "unknown transition `{}`: use start, stop or delete",
            body.transition.chars().take(40).collect::<String>()
        ))
    })?;
    let retention = match body.retain.as_deref() {
        None => None,
        Some(text) => Some(text.parse::<abode_store::DeleteRetention>().map_err(|_| {
            ApiError::bad_request(format!(
                "unknown retain `{}`: use rules, all or none",
                text.chars().take(40).collect::<String>()
            ))
        })?),
    };
    if retention.is_some() && transition != abode_store::Transition::Delete {
        return Err(ApiError::bad_request("retain applies only to a delete"));
    }
    let unsaved = match (body.discard_unsaved, body.confirm_unsaved) {
        (false, None) => abode_control::UnsavedConsent::None,
        (true, None) => abode_control::UnsavedConsent::Discard,
        (false, Some(digest)) => abode_control::UnsavedConsent::Confirm(digest),
        (true, Some(_)) => {
            return Err(ApiError::bad_request(
                "give `discard_unsaved` or `confirm_unsaved`, not both",
            ))
        }
    };
    if unsaved != abode_control::UnsavedConsent::None
        && transition != abode_store::Transition::Delete
    {
        return Err(ApiError::bad_request(
            "discard_unsaved and confirm_unsaved apply only to a delete",
        ));
    }
    let request = BuildRequest {
        transition,
        version: VersionChoice::from_wire(body.template_version, body.update.unwrap_or(false)),
        parameters: body.parameters,
        retention,
        unsaved,
    };
    let build = state
        .control
        .workspace_builds()
        .request_transition(&caller, &workspace, &request)
        .await?;
    ok(
        StatusCode::CREATED,
        abode_sdk::BuildAnswer {
            build: build_view(&build),
        },
    )
}

#[derive(Deserialize)]
struct BuildsQuery {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

async fn list_builds(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
    query: ListQueryResult<BuildsQuery>,
) -> ApiResult {
    let query = list_query(query)?;
    let status = query
        .status
        .as_deref()
        .map(|status| {
            status.parse::<BuildStatus>().map_err(|_| {
                ApiError::bad_request(format!(
                    "unknown build status \"{}\" (one of: pending, running, \
                     awaiting_confirmation, succeeded, failed, canceled)",
                    status.escape_debug()
                ))
            })
        })
        .transpose()?;
    let page = state
        .control
        .workspace_builds()
        .list_builds(
            &caller,
            &workspace,
            status,
            query.after.as_deref(),
            query.limit,
        )
        .await?;
    let builds: Vec<BuildView> = page.items.iter().map(build_view).collect();
    page_answer("builds", builds, page.next)
}

async fn get_build(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((workspace, number)): Path<(String, String)>,
) -> ApiResult {
    let number = parse_number(&number, "build number")?;
    let build = state
        .control
        .workspace_builds()
        .build(&caller, &workspace, number)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::BuildAnswer {
            build: build_view(&build),
        },
    )
}

async fn build_timings(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((workspace, number)): Path<(String, String)>,
) -> ApiResult {
    let number = parse_number(&number, "build number")?;
    let (build, timings) = state
        .control
        .workspace_builds()
        .build_timings(&caller, &workspace, number)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::TimingsAnswer {
            timings: timings_view(&build, &timings),
        },
    )
}

async fn build_logs(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((workspace, number)): Path<(String, String)>,
    query: Result<Query<LogsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let number = parse_number(&number, "build number")?;
    let wait = Duration::from_secs(query.wait.unwrap_or(0).min(MAX_LOG_WAIT_SECONDS));
    let page = state
        .control
        .workspace_builds()
        .build_logs(&caller, &workspace, number, query.after.unwrap_or(0), wait)
        .await?;
    let page = abode_sdk::LogPage {
        lines: page.lines.iter().map(log_line_view).collect(),
        status: page.status,
        done: page.done,
    };
    ok(StatusCode::OK, page)
}

async fn cancel_build(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((workspace, number)): Path<(String, String)>,
) -> ApiResult {
    let number = parse_number(&number, "build number")?;
    let build = state
        .control
        .workspace_builds()
        .cancel_build(&caller, &workspace, number)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::BuildAnswer {
            build: build_view(&build),
        },
    )
}

// ---- guarded builds ----

async fn confirm_build(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((workspace, number)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: ConfirmBuild = parse_json(body)?;
    let number = parse_number(&number, "build number")?;
    let build = state
        .control
        .workspace_builds()
        .confirm_build(
            &caller,
            &workspace,
            number,
            body.digest.as_deref().unwrap_or(""),
        )
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::BuildAnswer {
            build: build_view(&build),
        },
    )
}
