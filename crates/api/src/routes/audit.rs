//! The audit log, filtered and a page at a time, and exported whole,
//! streamed, for a compliance system.

use axum::extract::{Query, State};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use abode_control::AuditQuery as ControlAuditQuery;

use crate::extract::parse_time;
use crate::pages::{page_answer, ApiResult};
use crate::views::audit_event_view;
use crate::{ApiError, AppState, Authenticated};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/audit", get(audit))
        .route("/audit/export", get(export))
}

#[derive(Deserialize)]
struct AuditQuery {
    #[serde(default)]
    workspace: Option<String>,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    actor: Option<String>,
    #[serde(default)]
    action: Option<String>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

async fn audit(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: Result<Query<AuditQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let since = parse_time(query.since.as_deref(), "since")?;
    let until = parse_time(query.until.as_deref(), "until")?;
    let page = state
        .control
        .audit_log()
        .events(
            &caller,
            &ControlAuditQuery {
                workspace: query.workspace,
                target: query.target,
                actor: query.actor,
                action: query.action,
                since,
                until,
                after: query.after,
                limit: query.limit,
            },
        )
        .await?;
    let events: Vec<abode_sdk::AuditEvent> = page.items.iter().map(audit_event_view).collect();
    page_answer("events", events, page.next)
}

#[derive(Deserialize)]
struct ExportQuery {
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    format: Option<String>,
}

/// How an export writes each event.
#[derive(Debug, Clone, Copy)]
enum ExportFormat {
    /// One JSON object per line, as `GET /audit` gives each event.
    Jsonl,
    /// RFC 4180: a header row, then one row per event.
    Csv,
}

/// The whole audit log from `since` to `until`, oldest first, streamed a
/// page at a time (its memory is one page's, whatever the log's length).
/// Owners and auditors only: asked of anyone else, 403 before any byte.
async fn export(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: Result<Query<ExportQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(query) =
        query.map_err(|error| ApiError::bad_request(format!("invalid query: {error}")))?;
    let since = parse_time(query.since.as_deref(), "since")?;
    let until = parse_time(query.until.as_deref(), "until")?;
    let format = match query.format.as_deref().unwrap_or("jsonl") {
        "jsonl" => ExportFormat::Jsonl,
        "csv" => ExportFormat::Csv,
        other => {
            return Err(ApiError::bad_request(format!(
                "format {other:?} is not one of jsonl, csv"
            )))
        }
    };
    let audit = state.control.audit_log().clone();
    // The first page before the answer: a refusal is an answer, not a cut body.
    let first = audit.export_page(&caller, since, until, None).await?;
    let header = match format {
        ExportFormat::Jsonl => Vec::new(),
        ExportFormat::Csv => csv_row(&CSV_COLUMNS.map(String::from)).into_bytes(),
    };
    let pages = futures_util::stream::unfold((Some(first), Some(header)), move |(page, header)| {
        let (audit, caller) = (audit.clone(), caller.clone());
        async move {
            if let Some(header) = header.filter(|header| !header.is_empty()) {
                return Some((Ok(header), (page, None)));
            }
            let page = page?;
            let chunk = export_chunk(format, &page.items);
            let next = match page.next {
                None => None,
                Some(cursor) => {
                    match audit.export_page(&caller, since, until, Some(cursor)).await {
                        Ok(next) => Some(next),
                        Err(error) => {
                            // The body ends short: the client sees a cut
                            // export, never a whole-looking one.
                            tracing::warn!(%error, "an audit export stopped");
                            return Some((
                                Err(std::io::Error::other(error.to_string())),
                                (None, None),
                            ));
                        }
                    }
                }
            };
            Some((Ok(chunk), (next, None)))
        }
    });
    let content_type = match format {
        ExportFormat::Jsonl => "application/x-ndjson",
        ExportFormat::Csv => "text/csv; charset=utf-8",
    };
    axum::response::Response::builder()
        .status(axum::http::StatusCode::OK)
        .header("content-type", content_type)
        .body(axum::body::Body::from_stream(pages))
        .map_err(|error| ApiError::from(abode_control::ControlError::Internal(error.to_string())))
}

/// The columns of a CSV export, in order.
const CSV_COLUMNS: [&str; 12] = [
    "id",
    "time",
    "actor",
    "action",
    "target_type",
    "target",
    "outcome",
    "request_id",
    "client_ip",
    "user_agent",
    "status_code",
    "details",
];

fn export_chunk(format: ExportFormat, events: &[abode_store::AuditEvent]) -> Vec<u8> {
    let mut chunk = String::new();
    for event in events {
        let event = audit_event_view(event);
        match format {
            ExportFormat::Jsonl => {
                // An sdk type always serializes.
                chunk.push_str(&serde_json::to_string(&event).unwrap_or_default());
                chunk.push('\n');
            }
            ExportFormat::Csv => {
                let text = |value: &Option<String>| value.clone().unwrap_or_default();
                chunk.push_str(&csv_row(&[
                    event.id.to_string(),
                    text(&event.time),
                    text(&event.actor),
                    event.action.clone(),
                    text(&event.target_type),
                    text(&event.target),
                    text(&event.outcome),
                    text(&event.request_id),
                    text(&event.client_ip),
                    text(&event.user_agent),
                    event
                        .status_code
                        .map(|code| code.to_string())
                        .unwrap_or_default(),
                    text(&event.details),
                ]));
            }
        }
    }
    chunk.into_bytes()
}

/// One CSV row (RFC 4180): a field with a comma, a quote or a line break is
/// quoted, its quotes doubled; the row ends with CRLF.
pub fn csv_row(fields: &[String]) -> String {
    let quoted: Vec<String> = fields
        .iter()
        .map(|field| {
            if field.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", field.replace('"', "\"\""))
            } else {
                field.clone()
            }
        })
        .collect();
    format!("{}\r\n", quoted.join(","))
}
