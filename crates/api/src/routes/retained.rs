//! `/retained` (docs/api.md, "Retained resources"): what workspace deletes
//! retained, handed to another owner, kept longer; a record someone may not
//! read answers 404.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;

use abode_control::Caller;
use abode_sdk::requests;
use abode_store::RetainedResource;

use crate::extract::{list_query, parse_json, ListQueryResult};
use crate::pages::{ok, page_answer, ApiResult};
use crate::views::rfc3339;
use crate::{ApiError, AppState, Authenticated};

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/retained", get(list))
        .route("/retained/:id", get(show))
        .route("/retained/:id/assign", post(assign))
        .route("/retained/:id/extend", post(extend))
        .route("/retained/:id/export", get(export))
        .route("/retained/:id/destroy", post(destroy))
        .route("/retained/:id/restore", post(restore))
        .route("/volumes/orphans", get(orphans))
}

/// Hands what a blocking writer writes to the response body, a chunk at a
/// time: a 200 MB volume is never held in memory.
struct ChunkWriter(tokio::sync::mpsc::Sender<Result<Vec<u8>, std::io::Error>>);

impl std::io::Write for ChunkWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .blocking_send(Ok(buf.to_vec()))
            .map_err(|_| std::io::Error::other("the client went away"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A tar of a retained volume with its manifest (`abode retained export`).
/// A failure after the first bytes ends the body early, so the client
/// never takes a cut archive for a whole one.
async fn export(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
) -> ApiResult {
    let export = state.control.retained().volume_export(&caller, &id).await?;
    let (sender, receiver) = tokio::sync::mpsc::channel(16);
    let writer = ChunkWriter(sender.clone());
    tokio::task::spawn_blocking(move || {
        let mut writer = std::io::BufWriter::with_capacity(256 * 1024, writer);
        // A snapshot is an export already: its archive is sent as it is.
        if let Some(archive) = &export.archive {
            use std::io::Write;
            let copied = std::fs::File::open(archive)
                .and_then(|mut file| std::io::copy(&mut file, &mut writer))
                .and_then(|_| writer.flush());
            if let Err(error) = copied {
                tracing::warn!(retained = %export.record.id, %error, "a snapshot export failed");
                let _ = sender.blocking_send(Err(error));
            }
            return;
        }
        if let Err(error) = abode_volume_archive::export(&export.dir, writer, &export.meta) {
            tracing::warn!(retained = %export.record.id, %error, "a volume export failed");
            let _ = sender.blocking_send(Err(std::io::Error::other(error.to_string())));
        }
    });
    let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|chunk| (chunk, receiver))
    });
    let response = axum::response::Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/x-tar")
        .body(axum::body::Body::from_stream(stream))
        .map_err(|error| {
            ApiError::from(abode_control::ControlError::Internal(error.to_string()))
        })?;
    Ok(response)
}

async fn orphans(State(state): State<AppState>, Authenticated(caller): Authenticated) -> ApiResult {
    let found = state.control.retained().orphan_volumes(&caller).await?;
    let orphans: Vec<abode_sdk::OrphanVolume> = found
        .iter()
        .map(|orphan| abode_sdk::OrphanVolume {
            name: orphan.name.clone(),
            size_bytes: orphan.size_bytes,
            modified_at: rfc3339(orphan.mtime_unix.saturating_mul(1000)),
        })
        .collect();
    ok(StatusCode::OK, abode_sdk::OrphanVolumesAnswer { orphans })
}

/// A record as the wire shows it (its destroy build's report as the store
/// decoded it).
pub(crate) fn retained_view(record: &RetainedResource) -> RetainedView {
    abode_sdk::RetainedResource {
        id: record.id.clone(),
        status: record.status.to_string(),
        address: record.address.clone(),
        resource_type: record.resource_type.clone(),
        provider: record.provider.clone(),
        import_id: record.import_id.clone(),
        attributes: serde_json::from_str(&record.attributes).unwrap_or(serde_json::Value::Null),
        owner: record.owner_name.clone(),
        workspace: record.workspace_name.clone(),
        template: record.template_name.clone(),
        template_version: record.template_version,
        build_id: record.build_id.clone(),
        retained_by: record.retained_by.clone(),
        retained_at: rfc3339(record.created_at),
        expires_at: record.expires_at.map(rfc3339),
        expire_action: record.expire_action.clone(),
        closed_at: record.closed_at.map(rfc3339),
        closed_by: record.closed_by.clone(),
        destroy_build: None,
        kind: record.kind.clone(),
        archive_bytes: record.archive_bytes,
    }
}

/// A record as the wire shows it.
pub(crate) type RetainedView = abode_sdk::RetainedResource<abode_guard::Report>;

/// A record with the build destroying it, if any.
async fn retained_with_build(
    state: &AppState,
    caller: &Caller,
    record: &RetainedResource,
) -> Result<RetainedView, ApiError> {
    let mut view = retained_view(record);
    if let Some(build) = state
        .control
        .retained()
        .destroy_build(caller, record)
        .await?
    {
        view.destroy_build = Some(crate::views::build_view(&build));
    }
    Ok(view)
}

#[derive(Deserialize)]
struct RetainedQuery {
    /// Everyone's records (those who may read every workspace).
    #[serde(default)]
    all: Option<bool>,
    /// Closed records (adopted, destroyed, void) too.
    #[serde(default)]
    closed: Option<bool>,
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

async fn list(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    query: ListQueryResult<RetainedQuery>,
) -> ApiResult {
    let query = list_query(query)?;
    let limit = abode_store::page_size(query.limit);
    let page = state
        .control
        .retained()
        .list(
            &caller,
            query.all.unwrap_or(false),
            query.closed.unwrap_or(false),
            query.after.as_deref(),
            limit,
        )
        .await?;
    let records: Vec<RetainedView> = page.items.iter().map(retained_view).collect();
    page_answer("retained", records, page.next)
}

async fn show(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
) -> ApiResult {
    let record = state.control.retained().show(&caller, &id).await?;
    ok(
        StatusCode::OK,
        retained_with_build(&state, &caller, &record).await?,
    )
}

/// Queues the destroy of a retained resource, or (with `digest`) confirms
/// its held plan.
async fn destroy(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: requests::DestroyRetained = match &body {
        Ok(bytes) if bytes.is_empty() => requests::DestroyRetained::default(),
        _ => parse_json(body)?,
    };
    let (record, _) = state
        .control
        .workspace_builds()
        .destroy_retained(&caller, &id, body.digest.as_deref())
        .await?;
    ok(
        StatusCode::ACCEPTED,
        retained_with_build(&state, &caller, &record).await?,
    )
}

/// Brings a snapshot's files back into a stopped workspace's volume.
async fn restore(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: requests::RestoreRetained = parse_json(body)?;
    let restored = state
        .control
        .workspace_builds()
        .restore_snapshot(&caller, &id, &body.to)
        .await?;
    ok(
        StatusCode::OK,
        abode_sdk::RestoredSnapshot {
            id: restored.record.id.clone(),
            workspace: body.to.clone(),
            volume: restored.volume.clone(),
            files: restored.summary.files,
            dirs: restored.summary.dirs,
            symlinks: restored.summary.symlinks,
            bytes: restored.summary.bytes,
        },
    )
}

async fn assign(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: requests::AssignRetained = parse_json(body)?;
    let record = state
        .control
        .retained()
        .assign(&caller, &id, &body.user)
        .await?;
    ok(StatusCode::OK, retained_view(&record))
}

async fn extend(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let body: requests::ExtendRetained = parse_json(body)?;
    let seconds = abode_guard::parse_retain_for(&body.by).ok_or_else(|| {
        ApiError::bad_request(format!(
            "`{}` is not a duration such as 30d, 12h or 90m (at most ten years)",
            body.by.chars().take(40).collect::<String>()
        ))
    })?;
    let by_ms = i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX);
    let record = state.control.retained().extend(&caller, &id, by_ms).await?;
    ok(StatusCode::OK, retained_view(&record))
}
