//! Routes of the in-app inbox (docs/api.md, "Notifications"): a person's
//! own messages, one page at a time, and marking them read.

use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;

use abode_store::Notification;

use crate::pages::page_answer;
use crate::views::rfc3339;
use crate::{ApiError, AppState, Authenticated};

/// The routes of this module, merged into `/api/v1`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/notifications", get(list))
        .route("/notifications/read-all", post(read_all))
        .route("/notifications/:id/read", post(read))
        .route(
            "/notifications/settings",
            get(settings).post(change_settings),
        )
        .route("/notifications/mandatory", post(mandatory))
        .route("/notifications/failed", get(failed))
}

fn settings_json(
    settings: &[abode_control::notifications::KindSetting],
) -> abode_sdk::NotificationSettingsAnswer {
    let settings: Vec<abode_sdk::NotificationSetting> = settings
        .iter()
        .map(|setting| abode_sdk::NotificationSetting {
            kind: setting.kind.as_str().to_string(),
            enabled: setting.enabled,
            mandatory: setting.mandatory,
        })
        .collect();
    abode_sdk::NotificationSettingsAnswer { settings }
}

fn kinds(names: &[String]) -> Result<Vec<abode_store::NotificationKind>, ApiError> {
    names
        .iter()
        .map(|name| abode_control::notifications::parse_kind(name).map_err(ApiError::from))
        .collect()
}

async fn settings(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
) -> Result<axum::response::Response, ApiError> {
    let settings = state.control.notifications().settings(&caller).await?;
    Ok(Json(settings_json(&settings)).into_response())
}

async fn change_settings(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    body: Result<
        Json<abode_sdk::requests::NotificationSettingsChange>,
        axum::extract::rejection::JsonRejection,
    >,
) -> Result<axum::response::Response, ApiError> {
    let Json(body) =
        body.map_err(|error| ApiError::bad_request(format!("invalid body: {error}")))?;
    let settings = state
        .control
        .notifications()
        .change_settings(&caller, &kinds(&body.disable)?, &kinds(&body.enable)?)
        .await?;
    Ok(Json(settings_json(&settings)).into_response())
}

async fn mandatory(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<axum::response::Response, ApiError> {
    // Refused before the body is read.
    state.control.notifications().may_set_policy(&caller)?;
    let body = body.map_err(|error| ApiError::bad_request(format!("invalid body: {error}")))?;
    let body: abode_sdk::requests::MandatoryKind = serde_json::from_slice(&body)
        .map_err(|error| ApiError::bad_request(format!("invalid body: {error}")))?;
    let kind = abode_control::notifications::parse_kind(&body.kind)?;
    state
        .control
        .notifications()
        .set_kind_mandatory(&caller, kind, body.mandatory)
        .await?;
    let settings = state.control.notifications().settings(&caller).await?;
    Ok(Json(settings_json(&settings)).into_response())
}

/// One inbox message as the API shows it.
fn notification_view(message: &Notification) -> abode_sdk::Notification {
    abode_sdk::Notification {
        id: message.id.clone(),
        kind: message.kind.as_str().to_string(),
        created_at: Some(rfc3339(message.created_at)),
        read: message.read_at.is_some(),
        read_at: message.read_at.map(rfc3339),
        // The event's fields (docs/notifications.md).
        payload: serde_json::from_str(&message.payload).unwrap_or(Value::Null),
    }
}

#[derive(Deserialize)]
struct ListQuery {
    #[serde(default)]
    unread: Option<bool>,
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

async fn list(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<axum::response::Response, ApiError> {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let page = state
        .control
        .notifications()
        .inbox(
            &caller,
            query.unread.unwrap_or(false),
            query.after,
            query.limit,
        )
        .await?;
    let items: Vec<abode_sdk::Notification> = page.items.iter().map(notification_view).collect();
    page_answer("notifications", items, page.next)
}

#[derive(Deserialize)]
struct PageQuery {
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

/// Deliveries given up on (owners), with their recipient, channel and last error.
async fn failed(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: Result<Query<PageQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<axum::response::Response, ApiError> {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let page = state
        .control
        .notifications()
        .failed(&caller, query.after, query.limit)
        .await?;
    let items: Vec<abode_sdk::FailedNotification> = page
        .items
        .iter()
        .map(|failed| {
            let message = &failed.notification;
            abode_sdk::FailedNotification {
                id: message.id.clone(),
                kind: message.kind.as_str().to_string(),
                recipient: failed.recipient_name.clone(),
                channel: message.channel.as_str().to_string(),
                attempts: message.attempts,
                last_error: message.last_error.clone(),
                created_at: Some(rfc3339(message.created_at)),
                payload: serde_json::from_str::<Value>(&message.payload).unwrap_or(Value::Null),
            }
        })
        .collect();
    page_answer("notifications", items, page.next)
}

async fn read(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
) -> Result<axum::response::Response, ApiError> {
    let message = state.control.notifications().read(&caller, &id).await?;
    Ok(Json(abode_sdk::NotificationAnswer {
        notification: notification_view(&message),
    })
    .into_response())
}

async fn read_all(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
) -> Result<axum::response::Response, ApiError> {
    let marked = state.control.notifications().read_all(&caller).await?;
    Ok(Json(abode_sdk::MarkedAnswer { marked }).into_response())
}
