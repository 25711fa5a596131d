//! `/provisioner-keys` (docs/api.md, "Provisioner keys"): the keys external
//! provisioner daemons authenticate with. The secret is in exactly one
//! answer, the creation's, which no cache may keep; lists and deletions show
//! a key's name, tags and maker only.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{delete, get};
use axum::{Json, Router};

use abode_control::ProvisionerKey;

use crate::extract::{list_query, parse_json, ListQueryResult};
use crate::pages::{page_answer, PageQuery};
use crate::views::rfc3339;
use crate::{ApiError, AppState, Authenticated};

/// The routes of this module, merged into `/api/v1`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/provisioner-keys", get(list).post(create))
        .route("/provisioner-keys/:name", delete(remove))
}

/// A provisioner key, never with its secret (docs/api.md).
fn key_view(key: &ProvisionerKey) -> abode_sdk::ProvisionerKey {
    abode_sdk::ProvisionerKey {
        name: key.name.clone(),
        tags: key.tags.clone(),
        created_at: rfc3339(key.created_at),
        created_by: key.created_by.clone(),
    }
}

async fn create(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    body: Result<Bytes, BytesRejection>,
) -> Result<axum::response::Response, ApiError> {
    // Refused before the body is read.
    state.control.provisioner_keys().may_create(&caller)?;
    let body: abode_sdk::requests::NewProvisionerKey = parse_json(body)?;
    let (key, secret) = state
        .control
        .provisioner_keys()
        .create(&caller, &body.name, &body.tags)
        .await?;
    let mut answer = (
        StatusCode::CREATED,
        Json(abode_sdk::CreatedProvisionerKey {
            key: key_view(&key),
            secret,
        }),
    )
        .into_response();
    answer
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(answer)
}

async fn list(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: ListQueryResult<PageQuery>,
) -> Result<axum::response::Response, ApiError> {
    let query = list_query(query)?;
    let page = state
        .control
        .provisioner_keys()
        .list(&caller, query.after.as_deref(), query.limit)
        .await?;
    let items: Vec<abode_sdk::ProvisionerKey> = page.items.iter().map(key_view).collect();
    page_answer("provisioner_keys", items, page.next)
}

async fn remove(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> Result<axum::response::Response, ApiError> {
    state
        .control
        .provisioner_keys()
        .delete(&caller, &name)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
