//! Linked accounts (docs/external-auth.md): the page listing the server's
//! external auth providers with a Link or Unlink button each, and the
//! provider's redirect back after a person granted access to their account
//! (the server trades the code for tokens). The redirect needs no dashboard
//! session: the link's `state`, made for the person who started it, says
//! whose account it is (a state works once, for 10 minutes).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use serde::Deserialize;

use crate::html::{self, page, path_segment, respond, see_other, time};
use crate::nav::header;
use crate::session::{Viewer, CSRF_FIELD};
use crate::state::WebState;

/// `/external-auth`: every provider, linked or not, with its button.
pub(crate) async fn list(State(state): State<WebState>, viewer: Viewer) -> Response {
    render(&state, &viewer, StatusCode::OK, None).await
}

async fn render(
    state: &WebState,
    viewer: &Viewer,
    status: StatusCode,
    message: Option<String>,
) -> Response {
    let links = match state.control.external_auth().list(&viewer.caller).await {
        Ok(links) => links,
        Err(error) => return html::control_error(error),
    };
    let body = html! {
        h1 { "Linked accounts" }
        p class="muted" {
            "Your workspaces clone and push as you with the accounts you link here: "
            "Git inside a workspace gets a fresh token from its agent when it asks. "
            "No token is ever shown, in a template, a build or its log."
        }
        @if let Some(message) = &message {
            p class="error" role="alert" { (message) }
        }
        @if links.is_empty() {
            p { "This server has no external auth provider (--external-auth-config)." }
        } @else {
            table {
                thead { tr {
                    th scope="col" { "Provider" }
                    th scope="col" { "Type" }
                    th scope="col" { "Linked" }
                    th scope="col" { "" }
                } }
                tbody {
                    @for link in &links {
                        tr id=(format!("external-auth-{}", link.provider)) {
                            td class="mono" { (link.provider) }
                            td { (link.kind) }
                            td {
                                @match link.linked_at {
                                    Some(at) => { span class="badge good" { "linked" } " " (time(at)) }
                                    None => { span class="badge" { "not linked" } }
                                }
                            }
                            td {
                                @if link.linked {
                                    form method="post" action=(format!("/external-auth/{}/unlink", path_segment(&link.provider))) {
                                        input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
                                        button type="submit" aria-label=(format!("Unlink {}", link.provider)) { "Unlink" }
                                    }
                                } @else {
                                    a class="button primary" href=(format!("/external-auth/{}/link", path_segment(&link.provider)))
                                        aria-label=(format!("Link {}", link.provider)) { "Link" }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    respond(status, page("Linked accounts", Some(header(viewer)), body))
}

/// Starts a link: off to the provider's page. A link, not a form: the
/// dashboard's CSP keeps forms on its own origin, and a redirect after a
/// form to the provider would be one (starting a link changes nothing but
/// a new, short-lived state of the person's own).
pub(crate) async fn link(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
) -> Response {
    // A GET, so the CSRF check of forms does not cover it: a browser says
    // where a navigation came from, and only the dashboard's own page (or
    // an address typed by the person) starts a link; an image or a page of
    // another site (an app's subdomain included) does not.
    let site = headers
        .get("sec-fetch-site")
        .and_then(|value| value.to_str().ok());
    if site.is_some_and(|site| site != "same-origin" && site != "none") {
        return html::error_page(
            StatusCode::FORBIDDEN,
            "A link starts from the Linked accounts page (/external-auth), not from another site.",
        );
    }
    match state
        .control
        .external_auth()
        .start_link(&viewer.caller, &id)
        .await
    {
        // The provider's authorization URL, made by the server from its
        // configuration: a valid header.
        Ok(start) => match start.user_code {
            None => see_other(&start.url),
            // The device flow: the person types the code at the provider.
            Some(code) => respond(
                StatusCode::OK,
                page(
                    "Link your account",
                    Some(header(&viewer)),
                    html! {
                        h1 { "Link your " (id) " account" }
                        p { "Open " a href=(start.url) target="_blank" rel="noopener noreferrer" { (start.url) }
                            " and enter this code:" }
                        p class="mono" id="device-code" { strong { (code) } }
                        p class="muted" { "Once you granted access there, your account is linked: "
                            a href="/external-auth" { "Linked accounts" } }
                    },
                ),
            ),
        },
        Err(error) => {
            let message = format!("Not linked: {}", html::message_of(&error));
            render(&state, &viewer, html::status_of(&error), Some(message)).await
        }
    }
}

/// Unlinks (and revokes at the provider), then the page again.
pub(crate) async fn unlink(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Response {
    match state
        .control
        .external_auth()
        .unlink(&viewer.caller, &id)
        .await
    {
        Ok(None) => see_other("/external-auth"),
        Ok(Some(problem)) => {
            let message = format!(
                "Unlinked {id}, but the provider did not revoke its tokens ({problem}): revoke Abode's access there."
            );
            render(&state, &viewer, StatusCode::OK, Some(message)).await
        }
        Err(error) => {
            let message = format!("Not unlinked: {}", html::message_of(&error));
            render(&state, &viewer, html::status_of(&error), Some(message)).await
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

pub(crate) async fn callback(
    State(state): State<WebState>,
    Path(id): Path<String>,
    Query(query): Query<CallbackQuery>,
) -> Response {
    let outcome = match (&query.code, &query.state, &query.error) {
        (_, _, Some(error)) => Err((
            StatusCode::BAD_REQUEST,
            match &query.error_description {
                Some(description) => format!("{id} refused: {error}: {description}"),
                None => format!("{id} refused: {error}"),
            },
        )),
        (Some(code), Some(link), None) => state
            .control
            .external_auth()
            .finish_link(&id, link, code)
            .await
            .map_err(|error| {
                (
                    crate::html::status_of(&error),
                    crate::html::message_of(&error),
                )
            }),
        _ => Err((
            StatusCode::BAD_REQUEST,
            "the provider sent back neither a code nor an error".to_string(),
        )),
    };
    match outcome {
        Ok(username) => respond(
            StatusCode::OK,
            page(
                "Account linked",
                None,
                html! {
                    h1 { "Account linked" }
                    p role="status" id="external-auth-linked" {
                        "Your " (id) " account is linked to " (username)
                        ". Your workspaces can use it now; you can close this page."
                    }
                    p { a href="/external-auth" { "Linked accounts" } }
                },
            ),
        ),
        Err((status, message)) => respond(
            status,
            page(
                "Not linked",
                None,
                html! {
                    h1 { "Not linked" }
                    p class="error" role="alert" { (message) }
                },
            ),
        ),
    }
}
