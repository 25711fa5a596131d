//! The connection log's page (docs/connections.md): who connected to which
//! workspace, how, from where, for how long, with how many bytes, and how
//! it ended. The API's `GET /connections`: who sees which entries is the
//! gateway's answer.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use serde::Deserialize;

use abode_gateway::ConnectionLogQuery;

use crate::html::{self, page as whole_page, respond, time};
use crate::nav::header;
use crate::session::Viewer;
use crate::state::WebState;

#[derive(Deserialize, Default)]
pub(crate) struct ConnectionsPageQuery {
    #[serde(default)]
    workspace: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    after: Option<String>,
}

fn non_empty(value: Option<String>) -> Option<String> {
    value
        .map(|value| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

pub(crate) async fn connections(
    State(state): State<WebState>,
    viewer: Viewer,
    query: Option<Query<ConnectionsPageQuery>>,
) -> Response {
    let filters = query.map(|Query(query)| query).unwrap_or_default();
    let workspace = non_empty(filters.workspace);
    let user = non_empty(filters.user);
    let page = match state
        .gateway
        .connections()
        .log()
        .entries(
            &viewer.caller,
            &ConnectionLogQuery {
                workspace: workspace.clone(),
                user: user.clone(),
                since: None,
                after: non_empty(filters.after),
                limit: Some(100),
            },
        )
        .await
    {
        Ok(page) => page,
        Err(error) => return html::control_error(error),
    };
    let next = page.next.as_ref().map(|next| {
        let mut pairs = vec![("after", next.clone())];
        for (key, value) in [("workspace", &workspace), ("user", &user)] {
            if let Some(value) = value {
                pairs.push((key, value.clone()));
            }
        }
        format!(
            "/connections?{}",
            serde_urlencoded::to_string(&pairs).unwrap_or_default()
        )
    });
    let body = html! {
        h1 { "Connections" }
        form class="filters" method="get" action="/connections" role="search" aria-label="Filter the connection log" {
            div { label for="connections-workspace" { "Workspace (owner/name)" }
                  input id="connections-workspace" name="workspace" type="text" value=(workspace.as_deref().unwrap_or("")); }
            div { label for="connections-user" { "User" }
                  input id="connections-user" name="user" type="text" value=(user.as_deref().unwrap_or("")); }
            div { button type="submit" { "Filter" } }
        }
        table {
            thead { tr {
                th scope="col" { "Opened" }
                th scope="col" { "User" }
                th scope="col" { "Workspace" }
                th scope="col" { "Kind" }
                th scope="col" { "From" }
                th scope="col" { "Bytes in / out" }
                th scope="col" { "Closed" }
                th scope="col" { "End" }
            } }
            tbody {
                @for entry in &page.items {
                    tr {
                        td { (time(entry.opened_at)) }
                        td { (entry.user_name)
                             @if let Some(token) = &entry.token_name { " (token " span class="mono" { (token) } ")" } }
                        td class="mono" { (entry.workspace_name) }
                        td { (entry.kind)
                             @if let Some(app) = &entry.app { " " (app) }
                             @if let Some(port) = entry.port { " " (port) } }
                        td { (entry.client_ip.as_deref().unwrap_or("—")) }
                        td { (entry.bytes_to_workspace) " / " (entry.bytes_from_workspace) }
                        td { @match entry.closed_at { Some(at) => (time(at)), None => "open" } }
                        td { (entry.end_reason.as_deref().unwrap_or("—")) }
                    }
                }
            }
        }
        @if let Some(next) = next {
            p { a rel="next" href=(next) { "Older connections" } }
        }
    };
    respond(
        StatusCode::OK,
        whole_page("Connections", Some(header(&viewer)), body),
    )
}
