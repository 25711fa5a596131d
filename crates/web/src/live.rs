//! The workspace page's live metadata (issue 48, item 3): the table of its
//! agents' `metadata` blocks, and the server-sent events that update it
//! whenever an agent reports to this server (and every few seconds for the
//! ages). Like the build log's stream it lasts a short while and the
//! browser reconnects on its own.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use maud::{html, Markup};

use crate::session::Viewer;
use crate::state::WebState;

/// How long one event stream lasts before the browser reconnects.
const STREAM_LIFETIME: Duration = Duration::from_secs(30);
/// How often the ages move on without a report.
const TICK: Duration = Duration::from_secs(5);
/// How soon the browser reconnects after a stream ends.
const RECONNECT: Duration = Duration::from_secs(1);

/// What a value cell says: the value, or its error.
fn shown(item: &abode_sdk::AgentMetadata) -> String {
    match (&item.error, item.age_seconds) {
        (_, None) => "not reported yet".into(),
        (Some(error), _) => format!("error: {error}"),
        (None, _) => item.value.clone(),
    }
}

fn age(item: &abode_sdk::AgentMetadata) -> String {
    item.age_seconds
        .map(|seconds| format!("{} ago", abode_control::unsaved::age_text(seconds)))
        .unwrap_or_default()
}

/// The table, updated live from `stream`.
pub(crate) fn section(metadata: &[abode_sdk::AgentMetadata], stream: &str) -> Markup {
    html! {
        @if !metadata.is_empty() {
            h2 { "Metadata" }
            div data-metadata-stream=(stream) {
                table {
                    thead { tr {
                        th scope="col" { "Agent" } th scope="col" { "Name" }
                        th scope="col" { "Value" } th scope="col" { "Collected" }
                    } }
                    tbody {
                        @for item in metadata {
                            tr data-key={ (item.agent) "/" (item.key) } {
                                td class="mono" { (item.agent) }
                                td { (item.display_name) }
                                td class={ "mono" @if item.error.is_some() { " notice" } } data-value { (shown(item)) }
                                td data-age { (age(item)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The workspace's metadata as this server holds it now.
pub(crate) async fn current(state: &WebState, workspace_id: &str) -> Vec<abode_sdk::AgentMetadata> {
    let declared = state
        .control
        .agents()
        .workspace_watches(workspace_id)
        .await
        .unwrap_or_default();
    state.gateway.live().workspace(
        workspace_id,
        &declared,
        state.control.config().clock.now_ms(),
    )
}

/// `GET /workspaces/{owner}/{name}/metadata/events`: a `metadata` event
/// (a JSON list: agent, key, value, error, age_text) at once, at each
/// report of the workspace's agents to this server, and every few seconds.
pub(crate) async fn events(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((owner, name)): Path<(String, String)>,
) -> Response {
    let reference = format!("{owner}/{name}");
    let view = match state
        .control
        .workspaces()
        .get(&viewer.caller, &reference)
        .await
    {
        Ok(view) => view,
        Err(error) => return crate::html::control_error(error),
    };
    let workspace_id = view.workspace.id.clone();
    let changes = state.gateway.live().subscribe();
    let ends_at = Instant::now() + STREAM_LIFETIME;
    let retry = stream::iter([Ok::<_, Infallible>(Event::default().retry(RECONNECT))]);
    let updates = stream::unfold(
        (state, workspace_id, changes, true),
        move |(state, workspace_id, mut changes, first)| async move {
            if !first {
                let left = ends_at.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return None;
                }
                let wait = TICK.min(left);
                let _ = tokio::time::timeout(wait, async {
                    loop {
                        match changes.recv().await {
                            Ok(changed) if changed == workspace_id => return,
                            Ok(_) => continue,
                            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                                std::future::pending::<()>().await
                            }
                        }
                    }
                })
                .await;
            }
            let metadata = current(&state, &workspace_id).await;
            let items: Vec<serde_json::Value> = metadata
                .iter()
                .map(|item| {
                    serde_json::json!({
                        "key": format!("{}/{}", item.agent, item.key),
                        "value": shown(item),
                        "error": item.error.is_some(),
                        "age": age(item),
                    })
                })
                .collect();
            let event = Event::default()
                .event("metadata")
                .data(serde_json::Value::Array(items).to_string());
            Some((Ok(event), (state, workspace_id, changes, false)))
        },
    );
    Sse::new(futures_util::StreamExt::chain(retry, updates))
        .keep_alive(KeepAlive::default())
        .into_response()
}
