//! Single sign-on's two browser stops, at the fixed paths an admin
//! registers at the provider: `GET /api/v1/oidc/login` sends the browser to
//! the OpenID provider, `GET /api/v1/oidc/callback` is where the provider
//! sends it back. They are the dashboard's (HTML answers, its session
//! cookie), served under `/api/v1` because the callback's path is part of
//! the documented interface. The protocol is `abode-oidc`'s, the accounts
//! `Identity`'s; this module binds a sign-in to the browser that started it
//! and turns the outcome into a cookie, a redirect or a page.
//!
//! The binding: `login` sets a short-lived HttpOnly cookie holding the
//! sign-in's `state`, and `callback` goes on only when the provider's
//! `state` is that cookie's. A callback link made by someone else (their
//! own sign-in, to plant their account in another person's browser) finds
//! no such cookie there and is refused.

use axum::extract::{Query, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use maud::html;
use serde::Deserialize;

use abode_control::{ClientAddress, ControlError, OidcFinished, OidcStart};

use crate::html::{self as pages, page, respond};
use crate::session::{
    clear_cookie, cookie, request_id, set_cookie, PRESESSION_COOKIE, SESSION_COOKIE,
};
use crate::state::WebState;

/// The cookie that binds a sign-in to its browser.
const STATE_COOKIE: &str = "abode_oidc_state";
/// The paths the state cookie is sent to.
const STATE_COOKIE_PATH: &str = "/api/v1/oidc";

#[derive(Deserialize)]
pub(crate) struct LoginQuery {
    /// A local path to land on (the dashboard).
    redirect: Option<String>,
    /// The CLI's loopback port and host.
    cli_port: Option<String>,
    cli_host: Option<String>,
    /// The CLI's random value, sent back with the code.
    cli_state: Option<String>,
    /// `paste`: the CLI waits for the person to paste a code.
    cli: Option<String>,
}

fn state_cookie(value: &str, max_age: u64, secure: bool) -> String {
    // Only the login and callback need it.
    set_cookie(STATE_COOKIE, value, max_age, secure)
        .replace("Path=/;", &format!("Path={STATE_COOKIE_PATH};"))
}

/// Sends the browser to the provider with a new pending sign-in.
pub(crate) async fn login(
    State(state): State<WebState>,
    headers: HeaderMap,
    client: Option<Extension<ClientAddress>>,
    Query(query): Query<LoginQuery>,
) -> Response {
    let client = client.map(|Extension(client)| client);
    let secure = state.secure_for(client.as_ref());
    let start = match (&query.cli_port, query.cli.as_deref()) {
        (Some(port), _) => match port.parse::<u16>() {
            Ok(port) => OidcStart::CliLoopback {
                host: query.cli_host.as_deref().unwrap_or("127.0.0.1"),
                port,
                state: query.cli_state.as_deref().unwrap_or_default(),
            },
            Err(_) => {
                return refused(
                    StatusCode::BAD_REQUEST,
                    "The CLI's port is not a port number; run abode login again.",
                )
            }
        },
        (None, Some("paste")) => OidcStart::CliPaste,
        _ => OidcStart::Dashboard {
            redirect: query.redirect.as_deref(),
        },
    };
    let begun = state
        .control
        .identity()
        .oidc_begin(start, client.map(|client| client.ip), request_id(&headers))
        .await;
    match begun {
        Ok((url, sign_in_state)) => {
            let Ok(location) = HeaderValue::from_str(&url) else {
                return refused(
                    StatusCode::BAD_GATEWAY,
                    "The identity provider's sign-in address is not valid.",
                );
            };
            let mut response =
                (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response();
            let max_age = abode_oidc::pending::LOGIN_TTL.as_secs();
            if let Ok(value) = HeaderValue::from_str(&state_cookie(&sign_in_state, max_age, secure))
            {
                response.headers_mut().append(header::SET_COOKIE, value);
            }
            no_store(&mut response);
            response
        }
        Err(error) => control_refusal(ControlError::from(error)),
    }
}

#[derive(Deserialize)]
pub(crate) struct CallbackQuery {
    state: Option<String>,
    code: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// Where the provider sends the browser back: the sign-in finished and
/// turned into a session, a CLI's code, or a page that says why not.
pub(crate) async fn callback(
    State(state): State<WebState>,
    headers: HeaderMap,
    client: Option<Extension<ClientAddress>>,
    Query(query): Query<CallbackQuery>,
) -> Response {
    let client = client.map(|Extension(client)| client);
    let secure = state.secure_for(client.as_ref());
    let counted = state
        .control
        .identity()
        .oidc_attempt(
            client.as_ref().map(|client| client.ip),
            request_id(&headers),
        )
        .await;
    let mut response = match counted {
        Ok(()) => finish(&state, &headers, client.as_ref(), query, secure).await,
        Err(error) => control_refusal(ControlError::from(error)),
    };
    // The sign-in is over, whatever its outcome.
    if let Ok(value) = HeaderValue::from_str(&state_cookie("", 0, secure)) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    no_store(&mut response);
    response
}

async fn finish(
    state: &WebState,
    headers: &HeaderMap,
    client: Option<&ClientAddress>,
    query: CallbackQuery,
    secure: bool,
) -> Response {
    let Some(sign_in_state) = query.state.filter(|value| !value.is_empty()) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "The identity provider's answer carries no sign-in state; start again from the sign-in page.",
        );
    };
    if cookie(headers, STATE_COOKIE).as_deref() != Some(sign_in_state.as_str()) {
        return refused(
            StatusCode::BAD_REQUEST,
            "This sign-in was not started in this browser, was already used, or took longer than 10 minutes; start again from the sign-in page.",
        );
    }
    let provider_error = query.error.map(|error| match query.error_description {
        Some(description) => format!("{error}: {description}"),
        None => error,
    });
    let finished = state
        .control
        .identity()
        .oidc_finish(
            &sign_in_state,
            query.code.as_deref(),
            provider_error.as_deref(),
            client.map(|client| client.ip),
            request_id(headers),
        )
        .await;
    match finished {
        Ok(OidcFinished::Session { token, path, .. }) => {
            let lifetime = state
                .control
                .identity()
                .config()
                .session_max_lifetime
                .as_secs();
            let mut response = pages::see_other(&path);
            for value in [
                set_cookie(SESSION_COOKIE, &token, lifetime, secure),
                clear_cookie(PRESESSION_COOKIE, secure),
            ] {
                if let Ok(value) = HeaderValue::from_str(&value) {
                    response.headers_mut().append(header::SET_COOKIE, value);
                }
            }
            response
        }
        Ok(OidcFinished::Code {
            code,
            loopback: Some((host, port, cli_state)),
        }) => {
            // Only a loopback host the sign-in was started with (Identity
            // checked it): the code goes to the CLI on this machine.
            let host = if host.contains(':') && !host.starts_with('[') {
                format!("[{host}]")
            } else {
                host
            };
            let location = format!("http://{host}:{port}/callback?code={code}&state={cli_state}");
            match HeaderValue::from_str(&location) {
                Ok(value) => (StatusCode::SEE_OTHER, [(header::LOCATION, value)]).into_response(),
                Err(_) => refused(StatusCode::BAD_REQUEST, "The CLI's address is not valid."),
            }
        }
        Ok(OidcFinished::Code {
            code,
            loopback: None,
        }) => respond(
            StatusCode::OK,
            page(
                "Signed in",
                None,
                html! {
                    div class="card" {
                        h1 { "Signed in" }
                        p { "Paste this code where " code { "abode login" } " waits. It works once, within 5 minutes." }
                        p { code id="cli-code" { (code) } }
                    }
                },
            ),
        ),
        Err(error) => control_refusal(ControlError::from(error)),
    }
}

fn control_refusal(error: ControlError) -> Response {
    let mut response = refused(pages::status_of(&error), &pages::message_of(&error));
    if let ControlError::Throttled {
        retry_after_seconds,
        ..
    } = &error
    {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_seconds));
    }
    response
}

/// The page of a sign-in that did not happen: what went wrong, in one
/// sentence, and the way back to the sign-in page.
fn refused(status: StatusCode, message: &str) -> Response {
    respond(
        status,
        page(
            "Sign-in refused",
            None,
            html! {
                div class="card" {
                    h1 { "Sign-in refused" }
                    p class="error" role="alert" { (message) }
                    p { a href="/login" { "Back to sign in" } }
                }
            },
        ),
    )
}

/// Nothing of a sign-in is cached: its answers carry states and codes.
fn no_store(response: &mut Response) {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}
