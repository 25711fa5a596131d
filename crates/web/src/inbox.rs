//! The notifications inbox: one's own messages (held, blocked, failed and
//! expiring builds...), newest first, marked read one by one or all at
//! once. The API's `notifications`, `read_notification` and
//! `read_all_notifications`.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use serde::Deserialize;
use serde_json::Value;

use crate::html::{self, page as whole_page, respond, time, words};
use crate::nav::header;
use crate::session::{Viewer, CSRF_FIELD};
use crate::state::WebState;

#[derive(Deserialize, Default)]
pub(crate) struct InboxQuery {
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    unread: Option<String>,
}

pub(crate) async fn list(
    State(state): State<WebState>,
    viewer: Viewer,
    query: Option<Query<InboxQuery>>,
) -> Response {
    let query = query.map(|Query(query)| query).unwrap_or_default();
    let unread = query.unread.as_deref() == Some("on");
    let messages = match state
        .control
        .notifications()
        .inbox(&viewer.caller, unread, query.after.clone(), Some(50))
        .await
    {
        Ok(messages) => messages,
        Err(error) => return html::control_error(error),
    };
    let body = html! {
        h1 { "Inbox" }
        p { a href="/notifications/settings" { "Notification settings" } }
        div class="actions" {
            form method="get" action="/notifications" {
                label for="unread" { input id="unread" name="unread" type="checkbox" checked[unread]; " Unread only" }
                button type="submit" { "Show" }
            }
            form method="post" action="/notifications/read-all" {
                input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
                button type="submit" { "Mark all read" }
            }
        }
        @if messages.items.is_empty() {
            p { "No messages." }
        } @else {
            table {
                thead { tr {
                    th scope="col" { "When" }
                    th scope="col" { "What" }
                    th scope="col" { "Workspace and build" }
                    th scope="col" { "Read" }
                } }
                tbody {
                    @for message in &messages.items {
                        @let payload: Value = serde_json::from_str(&message.payload).unwrap_or(Value::Null);
                        @let workspace = payload.get("workspace").and_then(Value::as_str).unwrap_or("");
                        @let number = payload.get("build_number").and_then(Value::as_i64);
                        tr {
                            td { (time(message.created_at)) }
                            td {
                                (words(message.kind.as_str()))
                                @if let Some(error) = payload.get("error").and_then(Value::as_str) {
                                    br; span class="muted" { (error) }
                                }
                            }
                            td {
                                @if !workspace.is_empty() {
                                    a href=(format!("/workspaces/{workspace}")) { (workspace) }
                                    @if let Some(number) = number {
                                        " · " a href=(format!("/workspaces/{workspace}/builds/{number}")) { "build #" (number) }
                                    }
                                }
                            }
                            td {
                                @if message.read_at.is_some() { "read" } @else {
                                    form method="post" action=(format!("/notifications/{}/read", message.id)) {
                                        input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
                                        strong { "unread" } " "
                                        button type="submit" { "Mark read" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if let Some(next) = &messages.next {
            p { a rel="next" href=(format!("/notifications?{}", serde_urlencoded::to_string([("after", next)]).unwrap_or_default())) { "Older messages" } }
        }
    };
    respond(
        StatusCode::OK,
        whole_page("Inbox", Some(header(&viewer)), body),
    )
}

pub(crate) async fn read(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Response {
    match state
        .control
        .notifications()
        .read(&viewer.caller, &id)
        .await
    {
        Ok(_) => html::see_other("/notifications"),
        Err(error) => html::control_error(error),
    }
}

pub(crate) async fn read_all(State(state): State<WebState>, viewer: Viewer) -> Response {
    match state.control.notifications().read_all(&viewer.caller).await {
        Ok(_) => html::see_other("/notifications"),
        Err(error) => html::control_error(error),
    }
}
