//! Routes of fleet previews (docs/api.md, "Fleet previews"): starting a
//! preview of a template version and reading its latest report. Activation
//! itself stays with the template routes; it takes the acknowledged
//! preview's id.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;

use crate::extract::{list_query, parse_json, parse_number, ListQueryResult};
use crate::pages::{ok, PageQuery};
use crate::views::{preview_result_view, preview_view};
use crate::{ApiError, AppState, Authenticated};

/// The routes of this module, merged into `/api/v1`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/templates/:name/versions/:number/previews",
            post(start_preview),
        )
        .route(
            "/templates/:name/versions/:number/previews/latest",
            get(latest_preview),
        )
}

async fn start_preview(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((name, number)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<axum::response::Response, ApiError> {
    let body: abode_sdk::requests::StartPreview = parse_json(body)?;
    let number = parse_version(&number)?;
    let preview = state
        .control
        .previews()
        .start(&caller, &name, number, &body.workspaces)
        .await?;
    ok(
        StatusCode::CREATED,
        abode_sdk::PreviewAnswer {
            preview: preview_view(&preview),
        },
    )
}

/// The latest preview with a page of its results; `preview` is null when
/// the version was never previewed.
async fn latest_preview(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path((name, number)): Path<(String, String)>,
    query: ListQueryResult<PageQuery>,
) -> Result<axum::response::Response, ApiError> {
    let query = list_query(query)?;
    let number = parse_version(&number)?;
    let report = state
        .control
        .previews()
        .report(&caller, &name, number, query.after.as_deref(), query.limit)
        .await?;
    let Some(report) = report else {
        return ok(
            StatusCode::OK,
            abode_sdk::PreviewPage {
                preview: None,
                results: Vec::new(),
                next: None,
            },
        );
    };
    ok(
        StatusCode::OK,
        abode_sdk::PreviewPage {
            preview: Some(preview_view(&report.preview)),
            results: report
                .results
                .items
                .iter()
                .map(preview_result_view)
                .collect(),
            next: report.results.next,
        },
    )
}

fn parse_version(raw: &str) -> Result<i64, ApiError> {
    parse_number(raw, "version")?.ok_or_else(|| ApiError::bad_request("give a version number"))
}
