//! The web terminal's page (docs/web-terminal.md): xterm.js on a shell in
//! the workspace. The page holds no secret and opens nothing itself: its
//! script opens the API's connection route (`kind=pty`) with the
//! dashboard's session cookie, which authorizes it exactly as `abode ssh`
//! (`workspace.connect`, audited), and keeps the session's id in the page's
//! address so that a reload attaches to the same shell.
//!
//! xterm.js makes `<style>` elements for its cells, which the dashboard's
//! policy (styles from this origin only) would refuse. This page's policy
//! adds a nonce of its own for styles, which its script gives xterm.js's
//! style elements; scripts stay this origin's only.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use serde::Deserialize;

use abode_gateway::ConnectRequest;
use abode_tunnel::{StreamKind, TerminalOpen};

use crate::html::{page_with, respond};
use crate::nav::{header, workspace_url};
use crate::session::Viewer;
use crate::state::WebState;

/// The style nonce of an answer: the security headers' layer writes the
/// page's policy with it.
#[derive(Debug, Clone)]
pub(crate) struct StyleNonce(pub(crate) String);

#[derive(Deserialize)]
pub(crate) struct TerminalQuery {
    agent: Option<String>,
    /// An app with a command: the terminal runs it instead of a shell.
    app: Option<String>,
}

pub(crate) async fn page(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((owner, name)): Path<(String, String)>,
    Query(query): Query<TerminalQuery>,
) -> Response {
    let reference = format!("{owner}/{name}");
    // What a connection would be refused for (not found, not allowed, not
    // running, no agent), said on the page instead of a dead terminal.
    let check = ConnectRequest {
        workspace: reference.clone(),
        kind: StreamKind::Pty,
        port: None,
        agent: query.agent.clone(),
        terminal: Some(TerminalOpen {
            session: "check".into(),
            rows: 1,
            cols: 1,
            offset: 0,
            command: None,
        }),
        app: query.app.clone(),
        client: Default::default(),
    };
    let refused = state
        .gateway
        .connections()
        .check(&viewer.caller, &check)
        .await
        .err();
    if let Some(abode_control::ControlError::NotFound(message)) = &refused {
        return crate::html::error_page(StatusCode::NOT_FOUND, message);
    }
    let nonce = crate::session::random_token();
    let connect = format!(
        "/api/v1/workspaces/{}/connect",
        abode_sdk::percent_encode(&reference)
    );
    let head = html! {
        link rel="stylesheet" href="/assets/vendor/xterm.css";
        script src="/assets/vendor/xterm.js" defer {}
        script src="/assets/vendor/addon-fit.js" defer {}
        script src="/assets/terminal.js" defer {}
    };
    let body = html! {
        h1 {
            @if let Some(app) = &query.app { (app) " in " }
            "Terminal of " a href=(workspace_url(&owner, &name)) { (name) }
        }
        @match &refused {
            Some(error) => {
                p class="notice" role="alert" { (error.to_string()) }
            }
            None => {
                p id="terminal-status" class="muted" role="status" { "Connecting…" }
                div id="terminal" class="terminal-screen"
                    data-connect=(connect)
                    data-agent=[query.agent.as_deref()]
                    data-app=[query.app.as_deref()]
                    data-style-nonce=(nonce) {}
                p class="muted" {
                    "Copy with Ctrl+Shift+C, paste with Ctrl+Shift+V. The shell keeps running for "
                    "five minutes after this page closes: reopen this address to return to it."
                }
            }
        }
    };
    let mut response = respond(
        StatusCode::OK,
        page_with(
            &format!("Terminal of {name}"),
            Some(header(&viewer)),
            head,
            body,
        ),
    );
    response.extensions_mut().insert(StyleNonce(nonce));
    response
}
