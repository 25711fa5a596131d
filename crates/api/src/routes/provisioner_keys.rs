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
use serde::{Deserialize, Serialize};

use abode_control::ProvisionerKey;

use crate::extract::{list_query, parse_json, ListQueryResult};
use crate::pages::{page_answer, PageQuery};
use crate::views::Rfc3339;
use crate::{ApiError, AppState, Authenticated};

/// The routes of this module, merged into `/api/v1`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/provisioner-keys", get(list).post(create))
        .route("/provisioner-keys/:name", delete(remove))
}

/// A provisioner key, never with its secret (docs/api.md).
#[derive(Serialize)]
struct ProvisionerKeyJson<'a> {
    name: &'a str,
    /// `key=value`, sorted.
    tags: &'a [String],
    created_at: Rfc3339,
    /// The username of the owner who made it.
    created_by: &'a str,
}

impl<'a> From<&'a ProvisionerKey> for ProvisionerKeyJson<'a> {
    fn from(key: &'a ProvisionerKey) -> Self {
        ProvisionerKeyJson {
            name: &key.name,
            tags: &key.tags,
            created_at: Rfc3339(key.created_at),
            created_by: &key.created_by,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewKeyBody {
    name: String,
    #[serde(default)]
    tags: Vec<String>,
}

/// The one answer that carries a key's secret.
#[derive(Serialize)]
struct CreatedKey<'a> {
    key: ProvisionerKeyJson<'a>,
    secret: &'a str,
}

async fn create(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    body: Result<Bytes, BytesRejection>,
) -> Result<axum::response::Response, ApiError> {
    // Refused before the body is read.
    state.control.may_create_provisioner_key(&caller)?;
    let body: NewKeyBody = parse_json(body)?;
    let (key, secret) = state
        .control
        .create_provisioner_key(&caller, &body.name, &body.tags)
        .await?;
    let mut answer = (
        StatusCode::CREATED,
        Json(CreatedKey {
            key: ProvisionerKeyJson::from(&key),
            secret: &secret,
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
        .list_provisioner_keys(&caller, query.after.as_deref(), query.limit)
        .await?;
    let items: Vec<ProvisionerKeyJson> = page.items.iter().map(ProvisionerKeyJson::from).collect();
    page_answer("provisioner_keys", items, page.next)
}

async fn remove(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> Result<axum::response::Response, ApiError> {
    state.control.delete_provisioner_key(&caller, &name).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
