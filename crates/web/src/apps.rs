//! Apps on the dashboard (docs/apps.md): a workspace's apps with their
//! health and links, and `/apps/auth`, where a person signed in here gets
//! a one-time code for the host of a subdomain app they may open (that host
//! never sees this origin's cookie).

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use serde::Deserialize;

use abode_gateway::{AppRefusal, AppView};

use crate::html::{self, badge};
use crate::session::Viewer;
use crate::state::WebState;

#[derive(Deserialize)]
pub(crate) struct AuthQuery {
    host: String,
    #[serde(default)]
    path: Option<String>,
}

pub(crate) async fn auth(
    State(state): State<WebState>,
    viewer: Viewer,
    Query(query): Query<AuthQuery>,
) -> Response {
    let path = query.path.as_deref().unwrap_or("/");
    match state
        .gateway
        .apps()
        .app_sign_in_redirect(&viewer.caller, &query.host, path)
        .await
    {
        Ok(url) => html::see_other(&url),
        Err(AppRefusal::Unavailable(why)) => {
            html::error_page(StatusCode::SERVICE_UNAVAILABLE, &why)
        }
        Err(_) => html::error_page(StatusCode::NOT_FOUND, "No such app."),
    }
}

/// The apps section of a workspace's page.
/// The apps table of a workspace's page (`workspace` its page's address):
/// an app with a URL links to it, one with a command opens a terminal that
/// runs the command.
pub(crate) fn section(apps: &[AppView], workspace: &str) -> Markup {
    html! {
        h2 { "Apps" }
        @if apps.is_empty() {
            p class="muted" { "None: a template declares apps with abode_app." }
        } @else {
            table class="apps" {
                thead { tr {
                    th scope="col" { "App" }
                    th scope="col" { "Agent" }
                    th scope="col" { "Shared with" }
                    th scope="col" { "Health" }
                } }
                tbody {
                    @for view in apps {
                        @let definition = &view.app.definition;
                        @let name = definition.display_name.as_deref().unwrap_or(&definition.slug);
                        tr {
                            td {
                                @match (view.url(), &definition.command) {
                                    (Some(url), _) => {
                                        a class="app-link" data-slug=(definition.slug) href=(url)
                                            target=(if definition.open_in == abode_control::apps_contract::AppOpenIn::Window { "_blank" } else { "_self" })
                                            rel="noopener noreferrer" { (name) }
                                    }
                                    (None, Some(command)) => {
                                        a class="app-link" data-slug=(definition.slug)
                                            href=(format!("{workspace}/terminal?app={}", abode_sdk::percent_encode(&definition.slug)))
                                            title=(command) { (name) }
                                        " " span class="mono" { (command) }
                                    }
                                    (None, None) => {
                                        (name) " " span class="muted" { "(not served: the server has neither --wildcard-access-url nor --allow-path-apps)" }
                                    }
                                }
                            }
                            td class="mono" { (view.app.agent_name) }
                            td { (definition.share.as_str()) }
                            td { (badge(view.app.health.as_str())) }
                        }
                    }
                }
            }
        }
    }
}
