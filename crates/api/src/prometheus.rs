//! The Prometheus side of the server: the middleware that counts and times
//! every API request by its route template, and the scrape endpoint served
//! on its own listener (`--prometheus-address`), apart from the API so that
//! it can be bound to another interface and never needs a token.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use abode_control::Metrics;

/// The route label of a request that matched no route (raw paths would
/// make a series per path anyone cares to ask for).
const UNMATCHED: &str = "unmatched";

/// Counts and times one request under its route template
/// (`/api/v1/workspaces/:workspace`, from axum's `MatchedPath`).
pub(crate) async fn record(
    State(metrics): State<Metrics>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or(UNMATCHED, MatchedPath::as_str)
        .to_string();
    let method = request.method().clone();
    let response = next.run(request).await;
    metrics.http_request(
        &route,
        method.as_str(),
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// `GET /metrics`: the registry in Prometheus text format. Only memory is
/// read; the database gauges are refreshed in the background.
/// The agents' monitor gauges are read from `live` at each scrape.
pub(crate) fn scrape_router(metrics: Metrics, live: abode_gateway::LiveMetadata) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state((metrics, live))
}

async fn scrape(State((metrics, live)): State<(Metrics, abode_gateway::LiveMetadata)>) -> Response {
    let gauges: Vec<abode_metrics::MonitorGauge> = live
        .gauges()
        .into_iter()
        .map(|gauge| abode_metrics::MonitorGauge {
            workspace: gauge.workspace,
            agent: gauge.agent,
            path: gauge.path,
            used_percent: gauge.used_percent,
        })
        .collect();
    metrics.set_monitors(&gauges);
    match metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, abode_metrics::CONTENT_TYPE)], text).into_response(),
        Err(error) => {
            tracing::error!(%error, "cannot encode the metrics");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
