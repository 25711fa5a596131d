//! A workspace's scripts on the dashboard (`abode_script`, docs/provider.md):
//! a table of each agent's scripts with their latest run on the workspace's
//! page, and a page with the end of one script's latest log. The same reads
//! as `abode scripts WS [--log NAME]` and the API's `scripts` routes.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use serde::Deserialize;

use abode_sdk::WorkspaceScript;

use crate::html::{self, badge, page as whole_page, respond};
use crate::nav::{header, workspace_url};
use crate::session::Viewer;
use crate::state::WebState;

/// The scripts section of a workspace's page (`workspace` its address).
pub(crate) fn section(scripts: &[WorkspaceScript], workspace: &str) -> Markup {
    html! {
        h2 { "Scripts" }
        @if scripts.is_empty() {
            p class="muted" { "None: a template declares scripts with abode_script." }
        } @else {
            table class="scripts" {
                thead { tr {
                    th scope="col" { "Script" }
                    th scope="col" { "Agent" }
                    th scope="col" { "Runs on" }
                    th scope="col" { "Latest run" }
                    th scope="col" { "Runs" }
                    th scope="col" { "Log" }
                } }
                tbody {
                    @for script in scripts {
                        tr {
                            td { (script.display_name) }
                            td class="mono" { (script.agent) }
                            td {
                                (script.runs_on)
                                @if let Some(cron) = &script.cron { " (" span class="mono" { (cron) } " UTC)" }
                                @if script.start_blocks_login { br; span class="muted" { "blocks login" } }
                            }
                            td { (latest_run(script)) }
                            td { (script.runs) }
                            td { a href=(log_url(workspace, script)) { "log" } }
                        }
                    }
                }
            }
        }
    }
}

fn latest_run(script: &WorkspaceScript) -> Markup {
    html! {
        @match &script.state {
            None => { span class="muted" { "not run yet" } }
            Some(state) => {
                (badge(state))
                @if let Some(status) = script.exit_status { " (exit " (status) ")" }
                @if let Some(started) = &script.started_at { br; span class="muted" { "started " (started) } }
                @if let Some(ended) = &script.ended_at { br; span class="muted" { "ended " (ended) } }
            }
        }
    }
}

fn log_url(workspace: &str, script: &WorkspaceScript) -> String {
    format!(
        "{workspace}/scripts/log?agent={}&script={}",
        abode_sdk::percent_encode(&script.agent),
        abode_sdk::percent_encode(&script.display_name)
    )
}

#[derive(Deserialize)]
pub(crate) struct LogQuery {
    agent: String,
    script: String,
}

/// The end of a script's latest log.
pub(crate) async fn log_page(
    State(state): State<WebState>,
    viewer: Viewer,
    Path((owner, name)): Path<(String, String)>,
    query: Option<Query<LogQuery>>,
) -> Response {
    let Some(Query(query)) = query else {
        return html::error_page(
            StatusCode::BAD_REQUEST,
            "Give the agent and the script: ?agent=AGENT&script=NAME.",
        );
    };
    let reference = format!("{owner}/{name}");
    let log = match state
        .control
        .workspaces()
        .script_log(&viewer.caller, &reference, &query.agent, &query.script)
        .await
    {
        Ok(log) => log,
        Err(error) => return html::control_error(error),
    };
    let url = workspace_url(&owner, &name);
    let body = html! {
        p { a href=(url) { "← " (reference) } }
        h1 { "Script " (query.script) }
        p class="muted" { "Agent " span class="mono" { (query.agent) } ". The end of its latest run's output." }
        @if log.is_empty() {
            p class="muted" { "Nothing written yet." }
        } @else {
            pre class="log" { (log) }
        }
    };
    respond(
        StatusCode::OK,
        whole_page(
            &format!("Script {} of {}", query.script, reference),
            Some(header(&viewer)),
            body,
        ),
    )
}
