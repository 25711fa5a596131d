//! Routes of sessions and API tokens: logout and `/tokens` (docs/api.md,
//! "Users and sessions"). Kept apart from `users.rs`: these act on the
//! token a request carries rather than on accounts.
//!
//! Logout and token creation take the bearer token itself rather than the
//! authenticated user: logout revokes exactly that token, and only a session
//! (not an API token) may create API tokens.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{delete, post, put};
use axum::{Json, Router};

use abode_store::TokenRecord;

use crate::views::rfc3339;
use crate::{request_id, session_bearer, ApiError, AppState, Authenticated};

/// The routes of this module, merged into `/api/v1`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/logout", post(logout))
        .route("/tokens", post(create_token).get(list_tokens))
        .route("/tokens/:name", delete(revoke_token))
        .route("/users/me/password", put(change_password))
}

/// The request's bearer token, unchecked (the handler's control call checks
/// it), and its request id.
struct Bearer {
    token: String,
    request_id: Option<String>,
}

#[axum::async_trait]
impl FromRequestParts<AppState> for Bearer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = session_bearer(parts)?;
        // A token that is not good gets the handler's own answer; a good
        // one's scope must reach the route.
        if let Ok(caller) = state
            .control
            .identity()
            .authenticate_caller(&token, None)
            .await
        {
            crate::extract::route_scope(parts, &caller.scope)?;
        }
        Ok(Bearer {
            token,
            request_id: request_id(parts),
        })
    }
}

/// An API token as the API shows it: never the token, never its hash.
fn api_token_view(token: &TokenRecord) -> abode_sdk::ApiToken {
    abode_sdk::ApiToken {
        id: token.id.clone(),
        name: token.name.clone().unwrap_or_default(),
        created_at: Some(rfc3339(token.created_at)),
        last_used_at: token.last_used_at.map(rfc3339),
        expires_at: token.expires_at.map(rfc3339),
        scope: token.scope.to_string(),
    }
}

async fn logout(State(state): State<AppState>, bearer: Bearer) -> Result<StatusCode, ApiError> {
    state
        .control
        .identity()
        .logout(&bearer.token, bearer.request_id)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A person's own password; their other sessions end, this one stays.
async fn change_password(
    State(state): State<AppState>,
    bearer: Bearer,
    client: Option<axum::Extension<abode_control::ClientAddress>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<axum::response::Response, ApiError> {
    super::users::refuse_clear_password(
        &state,
        client.as_ref().map(|axum::Extension(client)| client),
    )?;
    let body: abode_sdk::requests::PasswordChange = crate::extract::parse_json(body)?;
    let ended = state
        .control
        .identity()
        .change_own_password(
            &bearer.token,
            &body.current_password,
            &body.password,
            bearer.request_id,
        )
        .await?;
    Ok((
        StatusCode::OK,
        Json(abode_sdk::SessionsEnded {
            sessions_ended: ended,
        }),
    )
        .into_response())
}

async fn create_token(
    State(state): State<AppState>,
    bearer: Bearer,
    body: Result<Bytes, BytesRejection>,
) -> Result<axum::response::Response, ApiError> {
    let bytes = body.map_err(|rejection| {
        ApiError::bad_request(format!("cannot read the request body: {rejection}"))
    })?;
    let body: abode_sdk::requests::NewApiToken = serde_json::from_slice(&bytes)
        .map_err(|error| ApiError::bad_request(format!("invalid JSON body: {error}")))?;
    let scope = token_scope(&state, &bearer, &body).await?;
    let (record, token) = state
        .control
        .identity()
        .create_api_token(
            &bearer.token,
            bearer.request_id,
            &body.name,
            body.lifetime_seconds.map(Duration::from_secs),
            scope,
        )
        .await?;
    // The one answer that carries a token: it is never shown again.
    Ok((
        StatusCode::CREATED,
        Json(abode_sdk::CreatedApiToken {
            api_token: api_token_view(&record),
            token,
        }),
    )
        .into_response())
}

/// The scope a token creation asks for: `all` when it names none; the
/// workspaces it is limited to by id, each one the caller may read.
async fn token_scope(
    state: &AppState,
    bearer: &Bearer,
    body: &abode_sdk::requests::NewApiToken,
) -> Result<abode_control::authz::TokenScope, ApiError> {
    use abode_control::authz::{ScopeGrant, ScopeKind, ScopeObjects, TokenScope};
    if body.scopes.is_empty() && body.templates.is_empty() && body.workspaces.is_empty() {
        return Ok(TokenScope::all());
    }
    let kinds = body
        .scopes
        .iter()
        .map(|name| name.parse::<ScopeKind>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| ApiError::bad_request(error.to_string()))?;
    let limits =
        |objects: ScopeObjects| kinds.iter().any(|kind| kind.limited_to() == Some(objects));
    if !body.templates.is_empty() && !limits(ScopeObjects::Templates) {
        return Err(ApiError::bad_request(
            "templates limit the scope template:push only: add --scope template:push",
        ));
    }
    if !body.workspaces.is_empty() && !limits(ScopeObjects::Workspaces) {
        return Err(ApiError::bad_request(
            "workspaces limit the scopes workspace:connect and workspace:build only: add one of them",
        ));
    }
    let mut workspace_ids = Vec::new();
    if !body.workspaces.is_empty() {
        let caller = state
            .control
            .identity()
            .authenticate_caller(&bearer.token, bearer.request_id.clone())
            .await?;
        for reference in &body.workspaces {
            let workspace = state
                .control
                .workspaces()
                .resolve(
                    &caller,
                    reference,
                    abode_control::authz::Action::WorkspaceRead,
                )
                .await?;
            workspace_ids.push(workspace.id);
        }
    }
    let grants = kinds
        .into_iter()
        .map(|kind| ScopeGrant {
            kind,
            objects: match kind.limited_to() {
                Some(ScopeObjects::Templates) => body.templates.clone(),
                Some(ScopeObjects::Workspaces) => workspace_ids.clone(),
                None => Vec::new(),
            },
        })
        .collect();
    TokenScope::new(grants).map_err(|error| ApiError::bad_request(error.to_string()))
}

async fn list_tokens(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: crate::extract::ListQueryResult<crate::pages::PageQuery>,
) -> Result<axum::response::Response, ApiError> {
    let query = crate::extract::list_query(query)?;
    let page = state
        .control
        .identity()
        .api_tokens(&caller, query.after.as_deref(), query.limit)
        .await?;
    let tokens: Vec<abode_sdk::ApiToken> = page.items.iter().map(api_token_view).collect();
    crate::pages::page_answer("tokens", tokens, page.next)
}

async fn revoke_token(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> Result<axum::response::Response, ApiError> {
    let revoked = state
        .control
        .identity()
        .revoke_api_token(&caller, &name)
        .await?;
    Ok(Json(abode_sdk::RevokedTokenAnswer {
        revoked: api_token_view(&revoked),
    })
    .into_response())
}
