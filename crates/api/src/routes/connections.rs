//! The connection log (issue 49): `GET /connections`, a page of
//! connections into workspaces as the caller may see them, filtered.

use axum::extract::{Query, State};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use abode_gateway::ConnectionLogQuery;

use crate::extract::parse_time;
use crate::pages::{page_answer, ApiResult};
use crate::views::connection_log_view;
use crate::{ApiError, AppState, Authenticated};

pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/connections", get(connections))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectionsQuery {
    #[serde(default)]
    workspace: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

async fn connections(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: Result<Query<ConnectionsQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let since = parse_time(query.since.as_deref(), "since")?;
    let page = state
        .gateway
        .connections()
        .log()
        .entries(
            &caller,
            &ConnectionLogQuery {
                workspace: query.workspace,
                user: query.user,
                since,
                after: query.after,
                limit: query.limit,
            },
        )
        .await?;
    let entries: Vec<abode_sdk::ConnectionLogEntry> =
        page.items.iter().map(connection_log_view).collect();
    page_answer("connections", entries, page.next)
}
