//! What every route reads from a request, in one place so that no route file
//! borrows from another: the caller (a person's session or API token, an
//! agent's token), a JSON body or a list's query with one-line 400s, and a
//! template upload with its own size limit.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use abode_control::Caller;

use crate::{ApiError, AppState, RequestId};

/// Largest accepted template upload (compressed).
pub(crate) const MAX_UPLOAD_BYTES: usize = 32 * 1024 * 1024;
/// How much of an oversized upload is read (and dropped) before answering,
/// so that the client, still sending, gets the 413 rather than a reset.
const MAX_DRAINED_BYTES: usize = 256 * 1024 * 1024;
/// Largest JSON body.
pub(crate) const MAX_JSON_BYTES: usize = 1024 * 1024;

/// Parses a JSON body with a one-line error (axum's own rejection is not JSON).
pub(crate) fn parse_json<T: DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let bytes = body.map_err(body_error)?;
    let bytes: &[u8] = if bytes.is_empty() { b"{}" } else { &bytes };
    serde_json::from_slice(bytes)
        .map_err(|error| ApiError::bad_request(format!("invalid JSON body: {error}")))
}

fn body_error(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        json_too_large()
    } else {
        ApiError::bad_request(format!("cannot read the request body: {rejection}"))
    }
}

pub(crate) fn json_too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!(
            "the request body is over this endpoint's limit of {} MiB",
            MAX_JSON_BYTES / 1024 / 1024
        ),
    )
}

/// Reads and drops an upload that is refused, up to [`MAX_DRAINED_BYTES`].
pub(crate) async fn discard_upload(mut body: axum::body::Body) {
    use http_body_util::BodyExt;
    let mut total = 0usize;
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(chunk) = frame.into_data() {
            total = total.saturating_add(chunk.len());
        }
        if total > MAX_DRAINED_BYTES {
            break;
        }
    }
}

/// Reads a template upload, refusing one over [`MAX_UPLOAD_BYTES`] with 413.
pub(crate) async fn read_upload(mut body: axum::body::Body) -> Result<Vec<u8>, ApiError> {
    use http_body_util::BodyExt;
    let mut data = Vec::new();
    let mut total = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            ApiError::bad_request(format!("cannot read the request body: {error}"))
        })?;
        let Ok(chunk) = frame.into_data() else {
            continue;
        };
        total = total.saturating_add(chunk.len());
        if total <= MAX_UPLOAD_BYTES {
            data.extend_from_slice(&chunk);
        } else if total > MAX_DRAINED_BYTES {
            break;
        }
    }
    if total > MAX_UPLOAD_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "the template archive is over the limit of {} MiB",
                MAX_UPLOAD_BYTES / 1024 / 1024
            ),
        ));
    }
    Ok(data)
}

/// The query string of a list, with a one-line 400 when it does not parse.
pub(crate) type ListQueryResult<T> = Result<Query<T>, axum::extract::rejection::QueryRejection>;

pub(crate) fn list_query<T>(query: ListQueryResult<T>) -> Result<T, ApiError> {
    query
        .map(|Query(query)| query)
        .map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))
}

/// A `since`/`until` parameter (RFC 3339) as Unix ms.
pub(crate) fn parse_time(raw: Option<&str>, what: &str) -> Result<Option<i64>, ApiError> {
    raw.map(|text| {
        crate::views::parse_rfc3339(text).ok_or_else(|| {
            ApiError::bad_request(format!(
                "{what} must be an RFC 3339 time such as 2024-05-01T12:00:00Z"
            ))
        })
    })
    .transpose()
}

pub(crate) fn parse_number(raw: &str, what: &str) -> Result<Option<i64>, ApiError> {
    if raw == "latest" {
        return Ok(None);
    }
    raw.parse::<i64>()
        .ok()
        .filter(|n| *n > 0)
        .map(Some)
        .ok_or_else(|| {
            ApiError::bad_request(format!("invalid {what} `{raw}`: use a positive number"))
        })
}

/// The authenticated user of a request.
pub struct Authenticated(pub Caller);

pub(crate) fn bearer(parts: &Parts) -> Option<String> {
    bearer_of(&parts.headers)
}

/// The bearer token in `headers`' `Authorization`, if any.
pub(crate) fn bearer_of(headers: &axum::http::HeaderMap) -> Option<String> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))?;
    let token = token.trim();
    (!token.is_empty()).then(|| token.to_string())
}

/// The session or API token of a request, or the 401 that says it is missing.
pub(crate) fn session_bearer(parts: &Parts) -> Result<String, ApiError> {
    bearer(parts).ok_or_else(|| {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing session token: log in first (Authorization: Bearer <token>)",
        )
    })
}

pub(crate) fn request_id(parts: &Parts) -> Option<String> {
    parts.extensions.get::<RequestId>().map(|id| id.0.clone())
}

#[axum::async_trait]
impl FromRequestParts<AppState> for Authenticated {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = session_bearer(parts)?;
        let caller = state
            .control
            .identity()
            .authenticate_caller(&token, request_id(parts))
            .await?;
        route_scope(parts, &caller.scope)?;
        Ok(Authenticated(caller))
    }
}

/// Refuses a token whose scope does not reach the route the request matched
/// (`route_scopes.rs`).
pub(crate) fn route_scope(
    parts: &Parts,
    scope: &abode_control::authz::TokenScope,
) -> Result<(), ApiError> {
    let route = parts
        .extensions
        .get::<axum::extract::MatchedPath>()
        .map(axum::extract::MatchedPath::as_str);
    crate::route_scopes::check(scope, &parts.method, route)
        .map_err(|refusal| ApiError::new(StatusCode::FORBIDDEN, "forbidden", refusal))
}

/// The agent token of a request, or the 401 that says it is missing.
pub(crate) fn agent_bearer(headers: &axum::http::HeaderMap) -> Result<String, ApiError> {
    bearer_of(headers).ok_or_else(|| {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing agent token",
        )
    })
}

/// The workspace agent of a request (authenticated by its agent token).
pub struct AuthenticatedAgent(pub abode_store::Agent);

#[axum::async_trait]
impl FromRequestParts<AppState> for AuthenticatedAgent {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let AgentWithToken { agent, .. } = AgentWithToken::from_request_parts(parts, state).await?;
        Ok(AuthenticatedAgent(agent))
    }
}

/// An agent authenticated by its token, with the token (a tunnel is
/// registered under it; a report stream checks it again).
pub(crate) struct AgentWithToken {
    pub(crate) agent: abode_store::Agent,
    pub(crate) token: String,
}

#[axum::async_trait]
impl FromRequestParts<AppState> for AgentWithToken {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = agent_bearer(&parts.headers)?;
        let agent = state.control.agents().authenticate_agent(&token).await?;
        Ok(AgentWithToken { agent, token })
    }
}
