//! Abode's HTTP JSON API under `/api/v1` (contract: docs/api.md), and the
//! assembly of a running server: database, control plane, gateway,
//! provisioners and listener.
//!
//! Handlers only translate: they read the request, call [`Control`] (or, for
//! a way into a workspace, the gateway, `abode-gateway`), and turn its answer
//! (or its typed error) into JSON. Every response carries an
//! `x-request-id`, which is also on every server log line of that request.
//!
//! # Modules
//!
//! Typed errors become `{"error":{"code","message"}}` with a one-line message
//! (docs/api.md), with `Retry-After` on 429 and 503; `json_errors` rewrites the
//! framework's own refusals into that shape. The same router serves the web
//! dashboard (`abode-web`) at `/`. The routes live in `routes/`, one file per
//! domain, assembled by `routes/mod.rs`; what they share is in `extract.rs`
//! (the caller, JSON bodies, queries, uploads) and `pages.rs` (answers, list
//! pages), and no route file imports another. `views.rs` turns the control
//! plane's records into `abode-sdk`'s types.
//!
//! - `client_address.rs` is the outermost layer of both listeners: it puts the
//!   request's `ClientAddress` (from `ConnectInfo`, the HTTPS listener's mark
//!   and `--trusted-proxies`) in its extensions, and the logins, their audit
//!   details, the dashboard's `Secure` cookies and `redirect.rs` read that,
//!   never `ConnectInfo` or a forwarding header.
//! - `apps_proxy.rs` is a layer over every route that takes the requests naming
//!   an app (its own host, or `/@...` paths) before any of the API's or
//!   dashboard's checks, signs their visitor in and hands them to the
//!   gateway (`abode-gateway`), which proxies them over the app's stream or
//!   relays them to the server holding its agent.
//! - `request_checks.rs` refuses what a page on another site can make a browser
//!   send, before any route: a `Host` that is not the server's (421, DNS
//!   rebinding), a state-changing request or a WebSocket upgrade from another
//!   `Origin` (403), and a JSON route's body not declared `application/json`
//!   (415); the machines' routes (agents, daemons, state backend, probes) keep
//!   their own credentials instead.
//! - `routes/connect.rs` holds the WebSocket routes: the agent's tunnel (`GET
//!   /agent/connect`, its socket read 256 KiB at a time), an agent's
//!   dial-back (`GET /agent/streams` with its ticket, switched to
//!   `abode-stream` and handed to the request waiting for it), and a person's `GET /workspaces/{ws}/connect` (a bearer token, or
//!   from a browser the dashboard's session cookie), opened by the gateway
//!   (here, or relayed to the server holding the agent's tunnel) before the
//!   `101`; what flows on the sockets is the gateway's.
//! - `routes/provisionerd.rs` serves the daemons' routes (a 20 s long-poll to
//!   acquire, then heartbeat, logs, judge, state, applied and complete per
//!   build), authenticated by a provisioner key, each a thin call into the
//!   control plane's daemon side; their bodies have their own 96 MiB limit, are
//!   read only once the build is known to be held by a daemon of the calling
//!   key, and those over 1 MiB take at most 256 MiB together (a heartbeat never
//!   waits behind them).
//! - `routes/state_backend.rs` serves Terraform's `http` backend
//!   (`/builds/{build}/state`, its lock and unlock; basic auth: the build's id
//!   and its run's secret, checked before a body is read) and a person's
//!   audited unlock.
//! - `prometheus.rs` counts each request by route template and serves `GET
//!   /metrics` on its own listener; `tls_listener.rs` serves the same router
//!   over `abode-tls`'s certificate; `server.rs` assembles a running server;
//!   `recovery.rs` is `abode server create-admin-user` and `reset-password` on
//!   the database alone.
//!
//! The listener passes each connection's peer address (read only by
//! `client_address.rs`) and sets `TCP_NODELAY` on it (a relayed SSH window
//! update must not wait for a delayed ACK; docs/benchmarks.md).
//!
//! # What it keeps
//!
//! - No secret (password, token other than the one being issued, sensitive
//!   Terraform value, saved plan) appears in a response or a log, with one
//!   audited, owners-only exception: `GET .../state`, a workspace's Terraform
//!   state, for cleaning up after `abode delete --orphan`.
//! - Every list endpoint answers one page (`limit`, `after`, `next`) from one
//!   store query; the CLI follows the pages.
//! - Every error answer is JSON in one shape, one bounded line; what a caller
//!   may not do is refused before its body is read or kept.

mod apps_proxy;
mod client_address;
mod connection;
mod extract;
mod handed_in;
mod hsts;
mod pages;
mod prometheus;
pub mod recovery;
mod redirect;
mod request_checks;
mod route_scopes;
mod routes;
mod server;
mod tls_listener;
pub mod views;

/// This crate's pure helpers, which its integration tests check case by
/// case (`tests/units.rs`): as unit tests they would need a second
/// compile of the whole crate (about a minute of CI's build) for a few tables.
#[doc(hidden)]
pub mod units {
    pub use crate::hsts::policy as hsts_policy;
    pub use crate::redirect::stays_plain;
    pub use crate::request_checks::{authority_host, is_json, origin_of, ServerNames};
    pub use crate::routes::audit::csv_row;
    pub use crate::views::{build_view, parse_rfc3339, rfc3339};
}

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use tracing::Instrument;

use abode_control::{Control, ControlError};

pub use abode_control::client_address::{Cidr, CidrError};
pub use abode_control::external_auth::ExternalAuthConfig;
/// What `abode server` configures notifications with.
pub use abode_control::notifications::{EmailConfig, NotificationsConfig, WebhookConfig};
pub use abode_control::tags::parse_tags as parse_provisioner_tags;
pub use abode_gateway::{AppsConfig, WildcardHost};
pub use abode_oidc::{OidcConfig, OidcSettings};
/// Backups and checks of a data dir's database (`abode server backup`,
/// `abode server check`).
pub use abode_store::backup;
pub(crate) use extract::{bearer, request_id, session_bearer};
pub use extract::{Authenticated, AuthenticatedAgent};
pub use server::{
    new_server_identity, prepare, serve, wait_for_signal, ServeError, Server, ServerError,
    ServerOptions, Setup, SignalError, StartupError, TlsOptions, DATABASE_FILE,
    DEFAULT_HSTS_MAX_AGE,
};

pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    pub control: Control,
    /// The machine room: the daemons' routes and the state backend.
    pub host: abode_host::Host,
    /// Every way into a workspace: tunnels, connections, apps.
    pub gateway: abode_gateway::Gateway,
}

/// The id of the current request (from the client when sane, else new).
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// An error answer: status, code and one-line message (docs/api.md, Errors).
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Seconds for a `Retry-After` header (429, 503).
    pub retry_after_seconds: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after_seconds: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
}

impl From<abode_gateway::Refused> for ApiError {
    fn from(refused: abode_gateway::Refused) -> Self {
        ApiError::new(refused.status, refused.code, refused.message)
    }
}

impl From<abode_control::IdentityError> for ApiError {
    fn from(error: abode_control::IdentityError) -> Self {
        ControlError::from(error).into()
    }
}

impl From<ControlError> for ApiError {
    fn from(error: ControlError) -> Self {
        let status = match &error {
            ControlError::BadRequest(_) | ControlError::InvalidArchive(_) => {
                StatusCode::BAD_REQUEST
            }
            ControlError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ControlError::Forbidden(_)
            | ControlError::QuotaExceeded(_)
            | ControlError::ExternalAuthRequired(_) => StatusCode::FORBIDDEN,
            ControlError::NotFound(_) => StatusCode::NOT_FOUND,
            ControlError::Conflict(_)
            | ControlError::AlreadyJudged(_)
            | ControlError::UnsavedWork(_) => StatusCode::CONFLICT,
            ControlError::InvalidTemplate(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ControlError::Throttled { .. } => StatusCode::TOO_MANY_REQUESTS,
            ControlError::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ControlError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let retry_after_seconds = error.retry_after_seconds();
        let message = match &error {
            ControlError::Internal(detail) => {
                // The detail is for the operator; the request span carries the id.
                tracing::error!(error = %detail, "internal error");
                "internal server error; the server log has the details under this request's x-request-id".to_string()
            }
            other => other.to_string(),
        };
        ApiError {
            retry_after_seconds,
            ..ApiError::new(status, error.code(), message)
        }
    }
}

/// The longest error message an answer carries.
const MAX_MESSAGE_CHARS: usize = 500;

/// One line, bounded: control characters (newlines, escapes) that reached a
/// message from a request are shown escaped, and a long one is cut.
fn one_line(message: &str) -> String {
    let mut line = String::new();
    for (count, c) in message.chars().enumerate() {
        if count == MAX_MESSAGE_CHARS {
            line.push('…');
            break;
        }
        if c.is_control() {
            line.extend(c.escape_default());
        } else {
            line.push(c);
        }
    }
    line
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = one_line(&self.message);
        let body = abode_sdk::ErrorEnvelope {
            error: abode_sdk::ErrorDetail {
                code: self.code.to_string(),
                message,
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after_seconds {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// Gives every request an id (the client's when it is sane), logs the request
/// under it, and returns it in the `x-request-id` header.
pub async fn request_id_layer(mut request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|value| value.to_str().ok())
        .filter(|value| {
            !value.is_empty()
                && value.len() <= 64
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        })
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    request.extensions_mut().insert(RequestId(id.clone()));
    // The dashboard (crates/web) reads the id from the header: the one it
    // audits with is this one, never a client's unchecked value.
    if let Ok(value) = HeaderValue::from_str(&id) {
        request.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    let method = request.method().clone();
    // The path only: query strings are not logged.
    let path = request.uri().path().to_string();
    let span = tracing::info_span!("request", request_id = %id, %method, %path);
    let mut response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    // An agent's reports come every second or so from every workspace: a
    // line each would be most of the log. Their failures are still said.
    if path.starts_with("/api/v1/agent/") && status.is_success() {
        span.in_scope(|| tracing::debug!(status = status.as_u16(), "answered"));
    } else {
        span.in_scope(|| tracing::info!(status = status.as_u16(), "answered"));
    }
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    response
}

/// Completes the audit events a request recorded with its client's
/// address, its user agent and the status it was answered with (docs/api.md,
/// "Audit"). Only a request that recorded an event writes anything
/// (`abode_identity::audit::recording`): on SQLite even an update that
/// changes nothing takes the one write lock, and no other request may
/// touch those rows.
pub async fn audit_request_layer(
    State(control): State<abode_control::Control>,
    request: Request,
    next: Next,
) -> Response {
    let request_id = request
        .extensions()
        .get::<RequestId>()
        .map(|id| id.0.clone());
    let client = request
        .extensions()
        .get::<abode_control::ClientAddress>()
        .map(|client| client.ip.to_string());
    // Kept short and printable: it is the client's to say anything in.
    let user_agent = request
        .headers()
        .get(axum::http::header::USER_AGENT)
        .and_then(|value| value.to_str().ok())
        .map(|agent| {
            agent
                .chars()
                .filter(|c| !c.is_control())
                .take(256)
                .collect::<String>()
        });
    let (response, recorded) = abode_control::audit_recording(next.run(request)).await;
    if let (true, Some(request_id)) = (recorded, request_id) {
        let status = i64::from(response.status().as_u16());
        if let Err(error) = control
            .identity()
            .complete_request_audit(
                &request_id,
                client.as_deref(),
                user_agent.as_deref(),
                status,
            )
            .await
        {
            tracing::error!(%error, "cannot complete the request's audit events");
        }
    }
    response
}

/// Every error answer is JSON in the documented shape: the framework's own
/// rejections (a path that is not valid percent-encoding, a method the route
/// does not have, a query that does not parse) answer plain text or nothing,
/// so they are rewritten here with their status, as one bounded line.
pub async fn json_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 4096)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_string())
        .unwrap_or_default();
    let code = match status {
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        _ if status.is_server_error() => "internal",
        _ => "bad_request",
    };
    let message = if text.is_empty() {
        match status {
            StatusCode::METHOD_NOT_ALLOWED => "this endpoint does not take that method".to_string(),
            other => other
                .canonical_reason()
                .unwrap_or("request refused")
                .to_lowercase(),
        }
    } else {
        text
    };
    let mut rewritten = ApiError::new(status, code, message).into_response();
    // Keep what tells the client how to go on (`allow` on a 405).
    for (name, value) in parts.headers.iter() {
        if name != axum::http::header::CONTENT_TYPE && name != axum::http::header::CONTENT_LENGTH {
            rewritten.headers_mut().insert(name.clone(), value.clone());
        }
    }
    rewritten
}

pub use routes::router;
