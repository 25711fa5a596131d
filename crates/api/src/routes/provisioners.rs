//! `GET /provisioners` (docs/api.md, "Provisioners"): every server's
//! provisioners with their heartbeat and the job each runs now.

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use serde::Serialize;

use crate::extract::{list_query, ListQueryResult};
use crate::pages::{page_answer, PageQuery};
use crate::views::Rfc3339;
use crate::{ApiError, AppState, Authenticated};

/// The routes of this module, merged into `/api/v1`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/provisioners", get(list))
}

/// A provisioner (docs/api.md).
#[derive(Serialize)]
struct ProvisionerJson<'a> {
    /// The server it runs in (its data dir's `server-id`).
    server: &'a str,
    name: &'a str,
    kind: &'static str,
    tags: &'a std::collections::BTreeMap<String, String>,
    version: &'a str,
    started_at: Rfc3339,
    last_heartbeat_at: Rfc3339,
    /// `connected`, or `stale`: no heartbeat for more than a job lease.
    status: &'static str,
    /// What it runs now: `build` (`workspace`, `build_number`,
    /// `transition`) or `preview` (`workspace`); null when idle.
    current_job: Option<CurrentJob<'a>>,
}

#[derive(Serialize)]
struct CurrentJob<'a> {
    kind: &'static str,
    workspace: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    build_number: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    transition: Option<&'static str>,
}

async fn list(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: ListQueryResult<PageQuery>,
) -> Result<axum::response::Response, ApiError> {
    let query = list_query(query)?;
    let page = state
        .control
        .list_provisioners(&caller, query.after.as_deref(), query.limit)
        .await?;
    let items: Vec<ProvisionerJson> = page
        .items
        .iter()
        .map(|view| {
            let row = &view.row;
            let current_job = match (&row.build_workspace, &row.preview_workspace) {
                (Some(workspace), _) => Some(CurrentJob {
                    kind: "build",
                    workspace,
                    build_number: row.build_number,
                    transition: row.build_transition.map(|transition| transition.as_str()),
                }),
                (None, Some(workspace)) => Some(CurrentJob {
                    kind: "preview",
                    workspace,
                    build_number: None,
                    transition: None,
                }),
                (None, None) => None,
            };
            ProvisionerJson {
                server: &row.server_id,
                name: &row.name,
                kind: row.kind.as_str(),
                tags: &view.tags,
                version: &row.version,
                started_at: Rfc3339(row.started_at),
                last_heartbeat_at: Rfc3339(row.last_beat_at),
                status: if view.stale { "stale" } else { "connected" },
                current_job,
            }
        })
        .collect();
    page_answer("provisioners", items, page.next)
}
