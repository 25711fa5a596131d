//! The signed-in person's API tokens (for scripts and CI): the list, a new
//! one (its secret shown once, on the answer to the form, never again) and
//! revoking one. The API's `api_tokens`, `create_api_token` (which takes the
//! session token, as the API's handler passes its bearer: only a session may
//! make tokens) and `revoke_api_token`.

use abode_control::ControlError;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;

use abode_store::TokenRecord;

use crate::html::{self, page as whole_page, path_segment, respond, time};
use crate::nav::header;
use crate::session::{request_id, Viewer, CSRF_FIELD};
use crate::state::WebState;

/// What the page says after a form: a new token to copy now, or the door's
/// refusal.
enum Outcome {
    Created { name: String, secret: String },
    Refused(StatusCode, String),
}

pub(crate) async fn list(State(state): State<WebState>, viewer: Viewer) -> Response {
    render(&state, &viewer, None).await
}

async fn render(state: &WebState, viewer: &Viewer, outcome: Option<Outcome>) -> Response {
    let tokens = match state
        .control
        .identity()
        .api_tokens(&viewer.caller, None, Some(200))
        .await
        .map_err(ControlError::from)
    {
        Ok(tokens) => tokens.items,
        Err(error) => return html::control_error(error),
    };
    let now = state.control.config().clock.now_ms();
    let cap_days = state
        .control
        .identity()
        .config()
        .api_token_max_lifetime
        .as_secs()
        / 86_400;
    let status = match &outcome {
        Some(Outcome::Refused(status, _)) => *status,
        _ => StatusCode::OK,
    };
    let body = html! {
        h1 { "API tokens" }
        p class="muted" {
            "A token lets a script or CI act as you through the API ("
            code { "Authorization: Bearer TOKEN" } " or " code { "ABODE_TOKEN" } ")."
        }
        @match &outcome {
            Some(Outcome::Created { name, secret }) => { (created(name, secret)) }
            Some(Outcome::Refused(_, message)) => { p class="error" role="alert" { (message) } }
            None => {}
        }
        @if tokens.is_empty() {
            p { "You have no API token." }
        } @else {
            table {
                thead { tr {
                    th scope="col" { "Name" }
                    th scope="col" { "Created" }
                    th scope="col" { "Last used" }
                    th scope="col" { "Expires" }
                    th scope="col" { "Revoke" }
                } }
                tbody {
                    @for token in &tokens {
                        (row(token, now, &viewer.csrf))
                    }
                }
            }
        }
        h2 { "New token" }
        form class="card" method="post" action="/tokens" {
            input type="hidden" name=(CSRF_FIELD) value=(viewer.csrf);
            label for="token-name" { "Name" }
            input id="token-name" name="name" type="text" required autocomplete="off";
            label for="token-days" { "Lifetime in days (empty: " (cap_days) ", the most this server allows)" }
            input id="token-days" name="days" type="text" inputmode="numeric" autocomplete="off";
            p { button class="primary" type="submit" { "Create the token" } }
        }
    };
    respond(status, whole_page("API tokens", Some(header(viewer)), body))
}

/// The one place a token's secret is ever shown.
fn created(name: &str, secret: &str) -> Markup {
    html! {
        div class="notice" role="status" {
            p { "Token " strong { (name) } " created. Copy it now: it is not shown again." }
            label for="new-token" { "Token" }
            input id="new-token" class="mono secret" type="text" readonly value=(secret);
        }
    }
}

fn row(token: &TokenRecord, now: i64, csrf: &str) -> Markup {
    let name = token.name.as_deref().unwrap_or("");
    let expired = token.expires_at.is_some_and(|at| at <= now);
    html! {
        tr {
            td class="mono" { (name) }
            td { (time(token.created_at)) }
            td { @match token.last_used_at { Some(at) => { (time(at)) } None => { "never" } } }
            td {
                @match token.expires_at { Some(at) => { (time(at)) } None => { "never" } }
                @if expired { " " span class="badge bad" { "expired" } }
            }
            td {
                form method="post" action=(format!("/tokens/{}/revoke", path_segment(name))) {
                    input type="hidden" name=(CSRF_FIELD) value=(csrf);
                    button type="submit" aria-label=(format!("Revoke {name}")) { "Revoke" }
                }
            }
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct NewToken {
    #[serde(default)]
    name: String,
    #[serde(default)]
    days: String,
}

/// A lifetime in whole days; empty: the server's cap (the door's default).
fn lifetime(days: &str) -> Result<Option<Duration>, String> {
    let days = days.trim();
    if days.is_empty() {
        return Ok(None);
    }
    match days.parse::<u64>() {
        Ok(days) if days > 0 => Ok(Some(Duration::from_secs(days.saturating_mul(86_400)))),
        _ => Err(format!(
            "the lifetime must be a whole number of days, at least 1 (not \"{}\")",
            days.chars().take(32).collect::<String>()
        )),
    }
}

pub(crate) async fn create(
    State(state): State<WebState>,
    viewer: Viewer,
    headers: axum::http::HeaderMap,
    Form(form): Form<NewToken>,
) -> Response {
    let lifetime = match lifetime(&form.days) {
        Ok(lifetime) => lifetime,
        Err(message) => {
            let outcome =
                Outcome::Refused(StatusCode::BAD_REQUEST, format!("Not created: {message}"));
            return render(&state, &viewer, Some(outcome)).await;
        }
    };
    let name = form.name.trim();
    let outcome = match state
        .control
        .identity()
        .create_api_token(
            &viewer.session,
            request_id(&headers),
            name,
            lifetime,
            abode_control::authz::TokenScope::all(),
        )
        .await
        .map_err(ControlError::from)
    {
        Ok((_, secret)) => Outcome::Created {
            name: name.to_string(),
            secret,
        },
        Err(error) => Outcome::Refused(
            html::status_of(&error),
            format!("Not created: {}", html::message_of(&error)),
        ),
    };
    // The answer itself shows the secret (no redirect to a page that could
    // show it again); pages are `no-store`, so no cache keeps it.
    render(&state, &viewer, Some(outcome)).await
}

pub(crate) async fn revoke(
    State(state): State<WebState>,
    viewer: Viewer,
    Path(name): Path<String>,
) -> Response {
    match state
        .control
        .identity()
        .revoke_api_token(&viewer.caller, &name)
        .await
        .map_err(ControlError::from)
    {
        Ok(_) => html::see_other("/tokens"),
        Err(error) => {
            let outcome = Outcome::Refused(
                html::status_of(&error),
                format!("Not revoked: {}", html::message_of(&error)),
            );
            render(&state, &viewer, Some(outcome)).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_are_whole_days() {
        let day = 86_400;
        let cases: [(&str, Result<Option<u64>, ()>); 6] = [
            ("", Ok(None)),
            ("  ", Ok(None)),
            ("30", Ok(Some(30 * day))),
            (" 1 ", Ok(Some(day))),
            ("0", Err(())),
            ("1.5", Err(())),
        ];
        for (given, expected) in cases {
            let got = lifetime(given)
                .map(|lifetime| lifetime.map(|duration| duration.as_secs()))
                .map_err(|_| ());
            assert_eq!(got, expected, "{given:?}");
        }
    }

    #[test]
    fn a_new_token_is_shown_as_text_once() {
        let page = created("<b>ci</b>", "abode_secret\"><script>").into_string();
        assert!(page.contains("&lt;b&gt;ci&lt;/b&gt;"), "{page}");
        assert!(
            page.contains("value=\"abode_secret&quot;&gt;&lt;script&gt;\""),
            "{page}"
        );
        assert_eq!(page.matches("abode_secret").count(), 1, "{page}");
    }
}
