//! The router of `/api/v1`: one module per domain, each with its routes, in
//! the order of docs/api.md; what they share is in `extract` and `pages`,
//! never in a sibling. The API's JSON layers wrap them all, then the web
//! dashboard is merged beside them.

mod agent;
pub(crate) mod audit;
mod builds;
mod connect;
mod connections;
mod external_auth;
mod groups;
mod identity;
mod notifications;
mod port_shares;
mod prebuilds;
mod previews;
mod provisioner_keys;
mod provisionerd;
mod provisioners;
mod retained;
mod schedules;
mod sharing;
mod state_backend;
mod templates;
mod users;
mod workspaces;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::extract::{discard_upload, json_too_large, MAX_JSON_BYTES};
use crate::pages::{ok, ApiResult};
use crate::{request_id_layer, ApiError, AppState};

pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .merge(users::routes())
        .merge(groups::routes())
        .merge(retained::routes())
        .merge(templates::routes())
        .merge(workspaces::routes())
        .merge(builds::routes())
        .merge(audit::routes())
        .merge(agent::routes())
        .merge(identity::routes())
        .merge(notifications::routes())
        .merge(prebuilds::routes())
        .merge(previews::routes())
        .merge(provisioners::routes())
        .merge(provisionerd::routes())
        .merge(provisioner_keys::routes())
        .merge(schedules::routes())
        .merge(connect::routes())
        .merge(connections::routes())
        .merge(port_shares::routes())
        .merge(sharing::routes())
        .merge(external_auth::routes())
        .merge(state_backend::routes())
        .layer(DefaultBodyLimit::max(MAX_JSON_BYTES))
        .layer(axum::middleware::from_fn(refuse_oversized_json))
        .layer(axum::middleware::from_fn(
            crate::request_checks::require_json,
        ));
    let metrics = state.control.config().metrics.clone();
    let config = state.control.config();
    let names = std::sync::Arc::new(crate::request_checks::ServerNames::new(
        &config.access_url,
        config.relay_url.as_deref(),
    ));
    // The web dashboard (crates/web) at `/`: its own pages and layers, merged
    // after the API's JSON layers so that its HTML answers stay HTML.
    let web = abode_web::router(state.control.clone(), state.gateway.clone());
    let control = state.control.clone();
    let apps = state.clone();
    Router::new()
        .nest("/api/v1", api)
        .fallback(not_found)
        .with_state(state)
        // Innermost, so that it runs inside each route and sees its template.
        .layer(axum::middleware::from_fn_with_state(
            metrics,
            crate::prometheus::record,
        ))
        .layer(axum::middleware::from_fn(crate::json_errors))
        .merge(web)
        // Over the dashboard too: what a page elsewhere can make a browser
        // send is refused before any route (request_checks.rs).
        .layer(axum::middleware::from_fn_with_state(
            names,
            crate::request_checks::check_host_and_origin,
        ))
        .layer(axum::middleware::from_fn_with_state(
            control,
            crate::audit_request_layer,
        ))
        // Apps (their own hosts, or /@... paths) are proxied before any of
        // the API's and dashboard's checks, which are not theirs.
        .layer(axum::middleware::from_fn_with_state(
            apps,
            crate::apps_proxy::serve_apps,
        ))
        .layer(axum::middleware::from_fn(request_id_layer))
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such API endpoint")
}

/// A JSON body declared longer than the limit is refused before a handler
/// sees it, and read to its end (up to [`MAX_DRAINED_BYTES`]) only to be
/// dropped: a client still writing it then reads the answer instead of a
/// connection reset under its feet. (A body without a declared length is
/// cut at the limit by `DefaultBodyLimit`.) Template uploads have their own
/// limit and refusal.
async fn refuse_oversized_json(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let upload = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .is_some_and(|path| {
            path.as_str().ends_with("/templates/:name/versions")
                || provisionerd::is_daemon_path(path.as_str())
                || state_backend::is_state_path(path.as_str())
        });
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    match declared {
        Some(length) if !upload && length > MAX_JSON_BYTES => {
            discard_upload(request.into_body()).await;
            json_too_large().into_response()
        }
        _ => next.run(request).await,
    }
}

/// Readiness: this server can serve, because its database answers (a load
/// balancer or Kubernetes stops sending it traffic while it does not;
/// `/health` stays the liveness answer, which a database outage must not
/// turn into a restart).
async fn ready(State(state): State<AppState>) -> ApiResult {
    match state.control.database_answers().await {
        Ok(()) => ok(
            StatusCode::OK,
            abode_sdk::Readiness {
                reason: None,
                status: "ready".to_string(),
            },
        ),
        Err(error) => {
            tracing::warn!(%error, "not ready: the database does not answer");
            ok(
                StatusCode::SERVICE_UNAVAILABLE,
                abode_sdk::Readiness {
                    reason: Some("the database does not answer".to_string()),
                    status: "unavailable".to_string(),
                },
            )
        }
    }
}

async fn health() -> ApiResult {
    ok(
        StatusCode::OK,
        abode_sdk::Health {
            status: "ok".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        },
    )
}
