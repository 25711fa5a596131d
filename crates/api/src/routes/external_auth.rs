//! External auth (docs/external-auth.md): the caller's linked accounts,
//! starting a link, and unlinking. The provider's redirect back is a
//! dashboard page (`abode_web`'s `/external-auth/{id}/callback`). Each a
//! thin call into `abode_control::external_auth`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use axum::Router;

use crate::pages::{ok, ApiResult};
use crate::views::rfc3339;
use crate::{AppState, Authenticated};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/external-auth", get(list))
        .route("/external-auth/:id/link", post(start_link))
        .route("/external-auth/:id", delete(unlink))
}

async fn list(State(state): State<AppState>, Authenticated(caller): Authenticated) -> ApiResult {
    let links = state.control.external_auth().list(&caller).await?;
    let views: Vec<abode_sdk::ExternalAuthLink> = links
        .into_iter()
        .map(|link| abode_sdk::ExternalAuthLink {
            provider: link.provider,
            kind: link.kind.to_string(),
            linked: link.linked,
            linked_at: link.linked_at.map(rfc3339),
            expires_at: link.expires_at.map(rfc3339),
        })
        .collect();
    ok(StatusCode::OK, views)
}

async fn start_link(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
) -> ApiResult {
    let start = state
        .control
        .external_auth()
        .start_link(&caller, &id)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::ExternalAuthStart {
            url: start.url,
            user_code: start.user_code,
        },
    )
}

async fn unlink(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
) -> ApiResult {
    let revocation = state.control.external_auth().unlink(&caller, &id).await?;
    ok(
        StatusCode::OK,
        abode_sdk::ExternalAuthUnlinked {
            provider: id,
            revocation,
        },
    )
}
