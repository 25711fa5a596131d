//! Sign-in, first-user setup and sign-out: the CLI's login, logout and
//! first user (`Identity::login_from`, `logout`, `create_first_user`), with
//! the session token kept in a cookie instead of a file.

use abode_control::ControlError;
use abode_control::{ClientAddress, SignInMethods};
use axum::extract::State;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Extension;
use axum::Form;
use maud::{html, Markup};
use serde::Deserialize;

use crate::html::{self, page, respond};
use crate::session::{
    clear_cookie, cookie, csrf_key, csrf_token, request_id, set_cookie, CSRF_FIELD,
    PRESESSION_COOKIE, SESSION_COOKIE,
};
use crate::state::WebState;

fn form_token(headers: &HeaderMap) -> String {
    csrf_key(headers)
        .map(|key| csrf_token(&key))
        .unwrap_or_default()
}

fn login_form(csrf: &str, username: &str, error: Option<&str>, methods: &SignInMethods) -> Markup {
    html! {
        div class="card" {
            h1 { "Sign in" }
            @if let Some(error) = error {
                p class="error" role="alert" { (error) }
            }
            @if let Some(text) = &methods.oidc {
                // A link, not a form: the provider's sign-in is a
                // top-level navigation that starts on this server.
                p { a class="button primary" id="oidc-sign-in" href="/api/v1/oidc/login" { "Sign in with " (text) } }
            }
            @if methods.password {
                @if methods.oidc.is_some() {
                    p class="muted" { "Or with a password:" }
                }
                form method="post" action="/login" {
                    input type="hidden" name=(CSRF_FIELD) value=(csrf);
                    label for="username" { "Username" }
                    input id="username" name="username" type="text" autocomplete="username" required autofocus value=(username);
                    label for="password" { "Password" }
                    input id="password" name="password" type="password" autocomplete="current-password" required;
                    p { button class="primary" type="submit" { "Sign in" } }
                }
            } @else {
                p class="muted" { "Password sign-in is turned off on this server." }
            }
            p class="muted" {
                "New server with no user yet? "
                a href="/setup" { "Set up the first user" }
                "."
            }
        }
    }
}

pub(crate) async fn login_page(State(state): State<WebState>, headers: HeaderMap) -> Response {
    let methods = state.control.identity().sign_in_methods();
    respond(
        StatusCode::OK,
        page(
            "Sign in",
            None,
            login_form(&form_token(&headers), "", None, &methods),
        ),
    )
}

#[derive(Deserialize)]
pub(crate) struct LoginForm {
    username: String,
    password: String,
}

/// A successful sign-in: the session cookie replaces the pre-session one.
fn signed_in(state: &WebState, secure: bool, token: &str) -> Response {
    let lifetime = state
        .control
        .identity()
        .config()
        .session_max_lifetime
        .as_secs();
    let mut response = html::see_other("/workspaces");
    let cookies = [
        set_cookie(SESSION_COOKIE, token, lifetime, secure),
        clear_cookie(PRESESSION_COOKIE, secure),
    ];
    for value in cookies {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// A password sent in the clear from another machine to a server that
/// serves HTTPS is refused before it is read (the API's `https_required`).
fn clear_password_refusal(
    state: &WebState,
    client: Option<&ClientAddress>,
) -> Option<ControlError> {
    let config = state.control.config();
    client
        .is_some_and(|client| !client.may_send_password(config.tls_served))
        .then(|| ControlError::Forbidden(ClientAddress::password_refusal(&config.access_url)))
}

pub(crate) async fn login(
    State(state): State<WebState>,
    headers: HeaderMap,
    // The real client, as the API resolves it for every request (the
    // socket's peer, or whom a trusted proxy forwards for): the throttle
    // counts failures per client address, as for the API's login.
    client: Option<Extension<ClientAddress>>,
    Form(form): Form<LoginForm>,
) -> Response {
    let client = client.map(|Extension(client)| client);
    let secure = state.secure_for(client.as_ref());
    let login = if let Some(refusal) = clear_password_refusal(&state, client.as_ref()) {
        Err(refusal)
    } else {
        state
            .control
            .identity()
            .login_from(
                &form.username,
                &form.password,
                client.map(|client| client.ip),
                request_id(&headers),
            )
            .await
            .map_err(ControlError::from)
    };
    match login {
        Ok((_, token)) => signed_in(&state, secure, &token),
        Err(error) => respond(
            html::status_of(&error),
            page(
                "Sign in",
                None,
                login_form(
                    &form_token(&headers),
                    &form.username,
                    Some(&html::message_of(&error)),
                    &state.control.identity().sign_in_methods(),
                ),
            ),
        ),
    }
}

fn setup_form(csrf: &str, error: Option<&str>) -> Markup {
    html! {
        div class="card" {
            h1 { "Set up the first user" }
            p { "The first user of a new server becomes its owner. Once a user exists, this page refuses." }
            @if let Some(error) = error {
                p class="error" role="alert" { (error) }
            }
            form method="post" action="/setup" {
                input type="hidden" name=(CSRF_FIELD) value=(csrf);
                label for="username" { "Username" }
                input id="username" name="username" type="text" autocomplete="username" required autofocus;
                label for="email" { "Email" }
                input id="email" name="email" type="email" autocomplete="email" required;
                label for="password" { "Password" }
                input id="password" name="password" type="password" autocomplete="new-password" required;
                p { button class="primary" type="submit" { "Create the owner and sign in" } }
            }
            p class="muted" { a href="/login" { "Sign in instead" } }
        }
    }
}

pub(crate) async fn setup_page(headers: HeaderMap) -> Response {
    respond(
        StatusCode::OK,
        page("First user", None, setup_form(&form_token(&headers), None)),
    )
}

#[derive(Deserialize)]
pub(crate) struct SetupForm {
    username: String,
    email: String,
    password: String,
}

pub(crate) async fn setup(
    State(state): State<WebState>,
    client: Option<Extension<ClientAddress>>,
    headers: HeaderMap,
    Form(form): Form<SetupForm>,
) -> Response {
    let client = client.map(|Extension(client)| client);
    let secure = state.secure_for(client.as_ref());
    let created = if let Some(refusal) = clear_password_refusal(&state, client.as_ref()) {
        Err(refusal)
    } else {
        state
            .control
            .identity()
            .create_first_user(
                &form.username,
                &form.email,
                &form.password,
                request_id(&headers),
            )
            .await
            .map_err(ControlError::from)
    };
    match created {
        Ok((_, token)) => signed_in(&state, secure, &token),
        Err(error) => respond(
            html::status_of(&error),
            page(
                "First user",
                None,
                setup_form(&form_token(&headers), Some(&html::message_of(&error))),
            ),
        ),
    }
}

/// Ends the session (the same logout as `abode logout`) and forgets the cookie.
pub(crate) async fn logout(
    State(state): State<WebState>,
    client: Option<Extension<ClientAddress>>,
    headers: HeaderMap,
) -> Response {
    let secure = state.secure_for(client.as_ref().map(|Extension(client)| client));
    if let Some(token) = cookie(&headers, SESSION_COOKIE) {
        // An already-ended session has nothing left to end.
        if let Err(error) = state
            .control
            .identity()
            .logout(&token, request_id(&headers))
            .await
            .map_err(ControlError::from)
        {
            tracing::debug!(%error, "sign-out of a session that had ended");
        }
    }
    let mut response = html::see_other("/login");
    if let Ok(value) = HeaderValue::from_str(&clear_cookie(SESSION_COOKIE, secure)) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}
