//! `GET /provisioners` (docs/api.md, "Provisioners"): every server's
//! provisioners with their heartbeat and the job each runs now.

use axum::extract::State;
use axum::routing::get;
use axum::Router;

use crate::extract::{list_query, ListQueryResult};
use crate::pages::{page_answer, PageQuery};
use crate::views::rfc3339;
use crate::{ApiError, AppState, Authenticated};

/// The routes of this module, merged into `/api/v1`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/provisioners", get(list))
}

async fn list(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: ListQueryResult<PageQuery>,
) -> Result<axum::response::Response, ApiError> {
    let query = list_query(query)?;
    let page = state
        .host
        .list_provisioners(&caller, query.after.as_deref(), query.limit)
        .await?;
    let items: Vec<abode_sdk::Provisioner> = page
        .items
        .iter()
        .map(|view| {
            let row = &view.row;
            // What it runs now: a build (with its number and transition) or
            // a preview; null when idle.
            let current_job = match (&row.build_workspace, &row.preview_workspace) {
                (Some(workspace), _) => Some(abode_sdk::ProvisionerJob {
                    kind: "build".to_string(),
                    workspace: workspace.clone(),
                    build_number: row
                        .build_number
                        .and_then(|number| u64::try_from(number).ok()),
                    transition: row
                        .build_transition
                        .map(|transition| transition.as_str().to_string()),
                }),
                (None, Some(workspace)) => Some(abode_sdk::ProvisionerJob {
                    kind: "preview".to_string(),
                    workspace: workspace.clone(),
                    build_number: None,
                    transition: None,
                }),
                (None, None) => None,
            };
            abode_sdk::Provisioner {
                server: row.server_id.clone(),
                name: row.name.clone(),
                host: row.host.clone(),
                kind: row.kind.as_str().to_string(),
                tags: view.tags.clone(),
                version: row.version.clone(),
                started_at: rfc3339(row.started_at),
                last_heartbeat_at: rfc3339(row.last_beat_at),
                // No heartbeat for more than a job lease: stale.
                status: if view.stale { "stale" } else { "connected" }.to_string(),
                current_job,
            }
        })
        .collect();
    page_answer("provisioners", items, page.next)
}
