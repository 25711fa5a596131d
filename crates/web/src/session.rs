//! The browser's session and the CSRF tokens of its forms.
//!
//! The session is the one a login makes for the CLI (`Identity::login_from`,
//! with its idle timeout and maximum lifetime), kept in an HttpOnly,
//! SameSite=Lax cookie (and Secure when the server is reached over TLS), so
//! no script can read it.
//!
//! A form's CSRF token is the HMAC-SHA256 of a fixed label keyed by the
//! session token: only someone holding the cookie can compute it, it needs
//! no server-side storage, and it ends with the session. Before a login
//! there is no session, so the key is a random pre-session cookie instead.
//! [`require_csrf`] checks the token of every request that is not a read
//! before any handler sees it: no handler can forget to.

use axum::body::Body;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use abode_control::{Caller, ControlError};

use crate::html;
use crate::state::WebState;

/// The form field that carries the token, named with the shell (`html.rs`)
/// whose sign-out form carries it too; the pages take it from here.
pub(crate) use crate::html::CSRF_FIELD;

pub(crate) const SESSION_COOKIE: &str = "abode_session";
pub(crate) const PRESESSION_COOKIE: &str = "abode_presession";
/// The header that carries the token on a script's request whose body is not
/// a form (a template upload); a page of another origin cannot set it.
pub(crate) const CSRF_HEADER: &str = "x-csrf-token";
/// What the token is an HMAC of: a label, so the key is used for nothing else.
const CSRF_LABEL: &[u8] = b"abode-web csrf v1";
/// Largest form body the dashboard reads (its forms are a few fields).
const MAX_FORM_BYTES: usize = 64 * 1024;

/// The value of cookie `name` in the request's `Cookie` headers.
pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim().to_string())
        .filter(|value| !value.is_empty())
}

/// The MAC of the label under `key`; HMAC takes keys of every length, so
/// `None` never happens in practice (and would make every token refused).
fn mac(key: &str) -> Option<Hmac<Sha256>> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key.as_bytes()).ok()?;
    mac.update(CSRF_LABEL);
    Some(mac)
}

/// The CSRF token of forms made for the holder of `key`.
pub(crate) fn csrf_token(key: &str) -> String {
    mac(key)
        .map(|mac| hex::encode(mac.finalize().into_bytes()))
        .unwrap_or_default()
}

/// Whether `given` is the token of `key` (compared in constant time).
pub(crate) fn csrf_matches(key: &str, given: &str) -> bool {
    match (mac(key), hex::decode(given)) {
        (Some(mac), Ok(bytes)) => mac.verify_slice(&bytes).is_ok(),
        _ => false,
    }
}

/// What the CSRF token of a request is derived from: its session, or before
/// a login its pre-session cookie.
pub(crate) fn csrf_key(headers: &HeaderMap) -> Option<String> {
    cookie(headers, SESSION_COOKIE).or_else(|| cookie(headers, PRESESSION_COOKIE))
}

/// The `Set-Cookie` value of a cookie only this server's pages send back.
pub(crate) fn set_cookie(name: &str, value: &str, max_age_seconds: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_seconds}{secure}")
}

/// The `Set-Cookie` value that removes cookie `name`.
pub(crate) fn clear_cookie(name: &str, secure: bool) -> String {
    set_cookie(name, "", 0, secure)
}

/// A fresh random value (32 bytes, hex): secrets, nonces.
pub(crate) fn random_token() -> String {
    new_secret()
}

fn new_secret() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// Refuses every request that changes something (anything but GET and HEAD)
/// without the form's CSRF token (or, from the page's script, the same
/// token in the `x-csrf-token` header); gives a first-time visitor the
/// pre-session cookie that the login form's token is derived from.
pub(crate) async fn require_csrf(
    State(state): State<WebState>,
    request: Request,
    next: Next,
) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD) {
        let secure = state.secure_for_request(request.extensions());
        return with_presession(request, next, secure).await;
    }
    let Some(key) = csrf_key(request.headers()) else {
        return refused_form();
    };
    if let Some(given) = request.headers().get(CSRF_HEADER) {
        // The body is not a form (an upload): it is left unread here.
        return match given.to_str() {
            Ok(given) if csrf_matches(&key, given) => next.run(request).await,
            _ => refused_form(),
        };
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_FORM_BYTES).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return html::error_page(
                StatusCode::PAYLOAD_TOO_LARGE,
                "This form is larger than the dashboard accepts.",
            )
        }
    };
    let fields: Vec<(String, String)> = serde_urlencoded::from_bytes(&bytes).unwrap_or_default();
    let valid = fields
        .iter()
        .find(|(name, _)| name == CSRF_FIELD)
        .is_some_and(|(_, given)| csrf_matches(&key, given));
    if !valid {
        return refused_form();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

fn refused_form() -> Response {
    html::error_page(
        StatusCode::FORBIDDEN,
        "This form was refused: it did not carry this session's security token. \
         Reload the page and try again.",
    )
}

async fn with_presession(mut request: Request, next: Next, secure: bool) -> Response {
    // Assets are cacheable and carry no form: never a cookie with them.
    if csrf_key(request.headers()).is_some() || request.uri().path().starts_with("/assets/") {
        return next.run(request).await;
    }
    let secret = new_secret();
    // The handler sees the cookie it is about to set, so the page's forms
    // carry the token of the key the browser will send back.
    if let Ok(value) = HeaderValue::from_str(&format!("{PRESESSION_COOKIE}={secret}")) {
        request.headers_mut().append(header::COOKIE, value);
    }
    let mut response = next.run(request).await;
    // A day is plenty to fill in a login form.
    if let Ok(value) =
        HeaderValue::from_str(&set_cookie(PRESESSION_COOKIE, &secret, 86_400, secure))
    {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// The request's id, for the audit log: the API's request-id layer, which
/// runs before the dashboard, sets the header to the id it chose.
pub(crate) fn request_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get("x-request-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_string)
}

/// The signed-in person of a page, and the CSRF token its forms carry.
pub(crate) struct Viewer {
    pub(crate) caller: Caller,
    pub(crate) csrf: String,
    /// The session token itself: what `Identity::create_api_token` takes, as
    /// the API's handler passes its bearer token (only a session may make
    /// API tokens).
    pub(crate) session: String,
}

/// A page's answer to a request without a good session: the login page,
/// with the stale cookie removed.
pub(crate) struct SignIn {
    secure: bool,
}

impl IntoResponse for SignIn {
    fn into_response(self) -> Response {
        let mut response = html::see_other("/login");
        if let Ok(value) = HeaderValue::from_str(&clear_cookie(SESSION_COOKIE, self.secure)) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
        response
    }
}

#[axum::async_trait]
impl FromRequestParts<WebState> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &WebState) -> Result<Self, Response> {
        let sign_in = || {
            SignIn {
                secure: state.secure_for_request(&parts.extensions),
            }
            .into_response()
        };
        let Some(token) = cookie(&parts.headers, SESSION_COOKIE) else {
            return Err(sign_in());
        };
        match state
            .control
            .identity()
            .authenticate_caller(&token, request_id(&parts.headers))
            .await
            .map_err(ControlError::from)
        {
            Ok(caller) => Ok(Viewer {
                caller,
                csrf: csrf_token(&token),
                session: token,
            }),
            Err(ControlError::Unauthorized(_)) => Err(sign_in()),
            Err(other) => Err(html::control_error(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_matches_only_its_own_key() {
        let token = csrf_token("session-a");
        let cases = [
            ("session-a", token.as_str(), true),
            ("session-b", token.as_str(), false),
            ("session-a", "", false),
            ("session-a", "not hex", false),
            ("session-a", &token[..10], false),
        ];
        for (key, given, expected) in cases {
            assert_eq!(csrf_matches(key, given), expected, "{key} {given}");
        }
    }

    #[test]
    fn cookies_are_found_by_exact_name() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("other=1; abode_session_x=2"),
        );
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("abode_session=tok; abode_presession="),
        );
        assert_eq!(cookie(&headers, SESSION_COOKIE).as_deref(), Some("tok"));
        assert_eq!(cookie(&headers, PRESESSION_COOKIE), None);
        assert_eq!(csrf_key(&headers).as_deref(), Some("tok"));
    }

    #[test]
    fn session_cookies_are_http_only_and_secure_over_tls() {
        let plain = set_cookie(SESSION_COOKIE, "t", 60, false);
        assert!(plain.contains("HttpOnly") && plain.contains("SameSite=Lax"));
        assert!(!plain.contains("Secure"));
        assert!(set_cookie(SESSION_COOKIE, "t", 60, true).ends_with("; Secure"));
    }
}
