//! The audit log, filtered and a page at a time.

use axum::extract::{Query, State};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use abode_control::AuditQuery as ControlAuditQuery;

use crate::extract::parse_time;
use crate::pages::{page_answer, ApiResult};
use crate::views::audit_event_view;
use crate::{ApiError, AppState, Authenticated};

pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/audit", get(audit))
}

#[derive(Deserialize)]
struct AuditQuery {
    #[serde(default)]
    workspace: Option<String>,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    actor: Option<String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

async fn audit(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let since = parse_time(query.since.as_deref(), "since")?;
    let until = parse_time(query.until.as_deref(), "until")?;
    let page = state
        .control
        .audit_log()
        .events(
            &caller,
            &ControlAuditQuery {
                workspace: query.workspace,
                target: query.target,
                actor: query.actor,
                action: query.action,
                since,
                until,
                after: query.after,
                limit: query.limit,
            },
        )
        .await?;
    let events: Vec<abode_sdk::AuditEvent> = page.items.iter().map(audit_event_view).collect();
    page_answer("events", events, page.next)
}
