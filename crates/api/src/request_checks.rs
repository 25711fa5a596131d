//! What a browser can be made to send to a server it never meant to reach,
//! refused before any handler runs.
//!
//! A page on any site can make its visitor's browser send requests to
//! Abode: a "simple" cross-site request (a form post, `text/plain`, no
//! preflight), or, after DNS rebinding (the page's own name made to resolve
//! to the server's address), requests the browser takes for the page's own
//! origin. Neither carries Abode's session (the API takes bearer tokens, the
//! dashboard's cookie is Abode's host's), but both reach what needs none: a
//! fresh server's first owner, the login, and whatever a server on a
//! private network or on loopback answers only because of where it is.
//!
//! Three checks close this, each refusing with one JSON line:
//! - the `Host` a request names must be this server's: the access URL's
//!   host, the relay URL's (other servers), or loopback (421 otherwise): a
//!   rebinding page's requests carry the page's own name;
//! - a state-changing request (POST, PUT, PATCH, DELETE) or a WebSocket
//!   upgrade that says where it comes from (`Origin`) must come from the
//!   access URL's origin or the request's own (403 otherwise): a cross-site
//!   form post does, and a page elsewhere opening a WebSocket to the web
//!   terminal's route would carry the dashboard's cookie;
//! - a JSON route's body must say it is JSON (415 otherwise,
//!   [`require_json`]): a form post cannot, without a preflight the server
//!   never grants. A template upload, the state backend and a daemon's
//!   snapshot archive take bodies of their own.
//!
//! The machines' routes are left to their own credentials, which a page
//! never has: the daemons' (a provisioner key), the agents' (an agent
//! token), Terraform's state backend (the run's secret) and the probes
//! (`/health`, `/ready`, which change nothing). They may be reached under
//! another name than the access URL's (a daemon at a Kubernetes Service,
//! an agent at a container host's address, a probe at a pod's IP).
//! `X-Forwarded-Host` is never read: a proxy in front passes `Host` on.

use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::{MatchedPath, Request};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use abode_control::ClientAddress;

use crate::ApiError;

/// Who this server answers as: the hosts a request may name, and the
/// origin its pages are served from.
#[derive(Debug, Clone)]
pub struct ServerNames {
    /// Lowercase host names or addresses, without port.
    hosts: Vec<String>,
    /// Every IP address is accepted as a host: the access URL names none
    /// (it is an unspecified address, `0.0.0.0`, the default when the
    /// server listens on every interface without `--access-url`). A
    /// rebinding page's requests always name a domain, never an address.
    any_address: bool,
    /// `scheme://host[:port]` of the access URL, as browsers write `Origin`.
    access_origin: Option<String>,
    /// The access URL as configured, for messages.
    access_url: String,
}

impl ServerNames {
    pub fn new(access_url: &str, relay_url: Option<&str>) -> ServerNames {
        let mut hosts = Vec::new();
        let mut any_address = false;
        for url in std::iter::once(access_url).chain(relay_url) {
            if let Some(host) = url_authority(url).and_then(authority_host) {
                if host
                    .parse::<IpAddr>()
                    .is_ok_and(|address| address.is_unspecified())
                {
                    any_address = true;
                }
                hosts.push(host);
            }
        }
        ServerNames {
            hosts,
            any_address,
            access_origin: origin_of(access_url),
            access_url: access_url.to_string(),
        }
    }

    /// Whether a request naming `host` (from `Host`, without port) is for
    /// this server.
    pub fn answers_for(&self, host: &str) -> bool {
        if host == "localhost" || self.hosts.iter().any(|known| known == host) {
            return true;
        }
        match host.parse::<IpAddr>() {
            Ok(address) => address.is_loopback() || self.any_address,
            Err(_) => false,
        }
    }
}

/// The routes whose callers are machines with credentials of their own
/// (module docs): `path` is the route template.
fn machine_route(path: &str) -> bool {
    let Some(path) = path.strip_prefix("/api/v1") else {
        return false;
    };
    path == "/health"
        || path == "/ready"
        || path.starts_with("/agent/")
        || path.starts_with("/provisionerd/")
        || path.starts_with("/builds/:build/state")
}

/// The layer of the Host and Origin checks (module docs), over the API and
/// the dashboard alike.
pub(crate) async fn check_host_and_origin(
    names: axum::extract::State<Arc<ServerNames>>,
    request: Request,
    next: Next,
) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_string());
    if route.as_deref().is_some_and(machine_route) {
        return next.run(request).await;
    }
    let host = request_host(&request);
    if let Some(host) = &host {
        let bare = authority_host(host);
        if !bare.as_deref().is_some_and(|bare| names.answers_for(bare)) {
            return ApiError::new(
                StatusCode::MISDIRECTED_REQUEST,
                "misdirected_request",
                format!(
                    "this server does not answer for the host `{host}`: use its access URL {}, \
                     or start it with --access-url naming the address people use",
                    names.access_url
                ),
            )
            .into_response();
        }
    }
    if changes_state(request.method()) || is_websocket_upgrade(request.headers()) {
        if let Some(origin) = request.headers().get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("").to_ascii_lowercase();
            let https = request
                .extensions()
                .get::<ClientAddress>()
                .is_some_and(|client| client.https);
            let own = host.map(|host| {
                let scheme = if https { "https" } else { "http" };
                format!("{scheme}://{}", host.to_ascii_lowercase())
            });
            let allowed = names.access_origin.as_deref() == Some(origin.as_str())
                || own.as_deref() == Some(origin.as_str());
            if !allowed {
                return ApiError::new(
                    StatusCode::FORBIDDEN,
                    "cross_origin",
                    format!(
                        "a cross-origin request is refused: it comes from `{origin}`, not from {}",
                        names.access_origin.as_deref().unwrap_or(&names.access_url)
                    ),
                )
                .into_response();
            }
        }
    }
    next.run(request).await
}

/// A browser's WebSocket handshake: a GET that browsers send with any
/// page's cookies, and whose answer no same-origin policy hides.
fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.eq_ignore_ascii_case("websocket"))
}

fn changes_state(method: &Method) -> bool {
    !matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

/// The host and port a request names: HTTP/2's `:authority` (the URI's),
/// else the `Host` header; `None` when it names none (no browser sends
/// such a request).
fn request_host(request: &Request) -> Option<String> {
    if let Some(authority) = request.uri().authority() {
        return Some(authority.as_str().to_string());
    }
    request
        .headers()
        .get(header::HOST)
        .map(|value| value.to_str().unwrap_or("\u{fffd}").to_string())
}

/// `example.com:7080` -> `example.com`, `[::1]:7080` -> `::1`, lowercase,
/// without a trailing dot; `None` for what is not a host and a port (a
/// `Host` never carries userinfo, a path or a second port: such a request
/// was forged to make a name look like this server's).
pub fn authority_host(authority: &str) -> Option<String> {
    let authority = authority.to_ascii_lowercase();
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after {
            "" => "",
            after => after.strip_prefix(':')?,
        };
        if !host
            .bytes()
            .all(|byte| byte.is_ascii_hexdigit() || byte == b':' || byte == b'.')
        {
            return None;
        }
        (host, port)
    } else {
        let (host, port) = authority.split_once(':').unwrap_or((&authority, ""));
        if !host
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'.')
        {
            return None;
        }
        (host, port)
    };
    if !port.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let host = host.trim_end_matches('.').to_string();
    (!host.is_empty()).then_some(host)
}

/// `http://host:port/path` -> `host:port`.
fn url_authority(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    rest.split(['/', '?', '#']).next()
}

/// The origin of a URL as browsers write it: lowercase scheme and host,
/// the port only when it is not the scheme's default.
pub fn origin_of(url: &str) -> Option<String> {
    let (scheme, _) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let authority = url_authority(url)?.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => ":80",
        "https" => ":443",
        _ => return None,
    };
    let authority = authority.strip_suffix(default_port).unwrap_or(&authority);
    Some(format!("{scheme}://{authority}"))
}

/// Whether a body is declared: a length above zero, or one sent in chunks.
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok())
            .is_some_and(|length| length > 0)
}

/// Whether a `Content-Type` is JSON's (`application/json`, with any
/// parameters).
pub fn is_json(content_type: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// The routes whose bodies are not JSON: a template upload (a `.tar.gz`),
/// Terraform's state backend (Terraform's own requests) and a daemon's
/// snapshot archive (a tar); `path` is the route template (with or without
/// `/api/v1`, as the layer sees it).
fn takes_other_bodies(path: &str) -> bool {
    let path = path.strip_prefix("/api/v1").unwrap_or(path);
    path == "/templates/:name/versions"
        || path.starts_with("/builds/:build/state")
        || path == "/provisionerd/jobs/:build/snapshots/:index"
}

/// A JSON route's body must be declared JSON: 415 for one that declares
/// another type (a form post's `text/plain`, `multipart/form-data`,
/// `application/x-www-form-urlencoded`), or none while it has a body. A
/// request without a body and without a type (`POST .../stop`) passes.
pub(crate) async fn require_json(request: Request, next: Next) -> Response {
    let other_bodies = request
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|path| takes_other_bodies(path.as_str()));
    if other_bodies || !changes_state(request.method()) {
        return next.run(request).await;
    }
    let headers = request.headers();
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|value| value.to_str().unwrap_or(""));
    let refused = match content_type {
        Some(content_type) => (!is_json(content_type)).then(|| content_type.to_string()),
        None => has_body(headers).then(|| "none".to_string()),
    };
    match refused {
        Some(content_type) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "this endpoint takes a JSON body (Content-Type: application/json), not `{content_type}`"
            ),
        )
        .into_response(),
        None => next.run(request).await,
    }
}
