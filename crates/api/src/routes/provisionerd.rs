//! The routes external provisioner daemons call (`/provisionerd/...`,
//! docs/api.md, "Provisioner daemons"), authenticated by a provisioner key
//! (`Authorization: Bearer <key>`), never by a person's token.
//!
//! Each route is a thin translation of the wire (`abode-protocol`): the
//! work and every rule are the control plane's (`daemon_jobs.rs`: claim,
//! lease, the daemon's ownership of a job, and the build's own
//! [`abode_host::ServerJob`]: log, guard, state, end), so a daemon's
//! build is judged and recorded exactly as an embedded one.

use std::time::Duration;

use abode_host::{DaemonCaller, DaemonNeed};
use abode_protocol::{
    AcquireRequest, CompleteRequest, DaemonHello, HeartbeatAnswer, JobWire, JudgeRequest,
    LogUpload, ReleaseRequest, StateAnswer, StateUpload, VerdictWire,
};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, FromRequestParts, MatchedPath, Path, Query, State};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, put};
use axum::{Json, Router};
use serde::de::DeserializeOwned;

use crate::{bearer, ApiError, AppState};

/// A job's upload: a plan, a state or a template archive of up to 64 MiB,
/// base64 in JSON.
const MAX_DAEMON_BODY: usize = 96 * 1024 * 1024;

/// The most memory the daemons' bodies being read at once may take, in
/// KiB (the permits of [`DAEMON_BODIES`]): 256 MiB, a few of the largest.
/// Further bodies wait for their turn before they are read, so that
/// parallel large uploads cannot take the server's memory.
const DAEMON_BODIES_KIB: usize = 256 * 1024;

/// A body up to this size is read at once, without waiting for its turn.
const SMALL_DAEMON_BODY: usize = 1024 * 1024;

/// The daemons' large bodies being read, in KiB ([`DAEMON_BODIES_KIB`]).
/// One per process (a server is one process).
static DAEMON_BODIES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(DAEMON_BODIES_KIB);

/// The routes of this module, merged into `/api/v1`.
pub(crate) fn routes() -> Router<AppState> {
    let limit = || DefaultBodyLimit::max(MAX_DAEMON_BODY);
    Router::new()
        .route("/provisionerd/acquire", post(acquire).layer(limit()))
        .route(
            "/provisionerd/jobs/:build/heartbeat",
            post(heartbeat).layer(limit()),
        )
        .route("/provisionerd/jobs/:build/logs", post(logs).layer(limit()))
        .route(
            "/provisionerd/jobs/:build/judge",
            post(judge).layer(limit()),
        )
        .route(
            "/provisionerd/jobs/:build/state",
            post(state).layer(limit()),
        )
        .route(
            "/provisionerd/jobs/:build/applied",
            post(applied).layer(limit()),
        )
        .route(
            "/provisionerd/jobs/:build/shutdown",
            post(shutdown).layer(limit()),
        )
        // The one body that is not JSON: an archive, streamed to disk as
        // it comes, never held (so no limit but the server's disk).
        .route(
            "/provisionerd/jobs/:build/snapshots/:index",
            put(snapshot).layer(DefaultBodyLimit::disable()),
        )
        .route(
            "/provisionerd/jobs/:build/complete",
            post(complete).layer(limit()),
        )
        .route(
            "/provisionerd/jobs/:build/release",
            post(release).layer(limit()),
        )
}

/// Whether a request is a daemon's (its body has this module's limit).
pub(crate) fn is_daemon_path(path: &str) -> bool {
    path.contains("/provisionerd/")
}

/// What a route's call needs of its build, checked before the body is
/// read; `None` for the routes that name no build's job, and for `release`
/// (a run's state lock goes back whoever holds the build now: the run's
/// secret is the proof).
fn need_of(parts: &Parts) -> Option<DaemonNeed> {
    let path = parts.extensions.get::<MatchedPath>()?.as_str();
    let (_, call) = path.split_once("/provisionerd/jobs/:build/")?;
    match call {
        "release" => None,
        "state" => Some(DaemonNeed::Held),
        _ => Some(DaemonNeed::Holding),
    }
}

/// The key a daemon authenticated with.
pub(crate) struct DaemonKey(abode_control::ProvisionerKey, String);

#[axum::async_trait]
impl FromRequestParts<AppState> for DaemonKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let secret = bearer(parts).ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "missing provisioner key (Authorization: Bearer <key>)",
            )
        })?;
        Ok(DaemonKey(
            state.control.provisioner_keys().for_secret(&secret).await?,
            abode_control::token_hash(&secret),
        ))
    }
}

impl DaemonKey {
    fn caller(&self, hello: &DaemonHello) -> Result<DaemonCaller, ApiError> {
        check_id("daemon_id", &hello.daemon_id)?;
        check_id("slot", &hello.slot)?;
        if hello.version.is_empty() || hello.version.len() > 64 {
            return Err(ApiError::bad_request("version must be 1-64 characters"));
        }
        Ok(DaemonCaller {
            key_hash: self.1.clone(),
            key_id: self.0.id.clone(),
            key_name: self.0.name.clone(),
            tags: self.0.tags.clone(),
            daemon_id: hello.daemon_id.clone(),
            slot: hello.slot.clone(),
        })
    }
}

/// A daemon's id or slot name: what `abode provisioner list` shows.
fn check_id(field: &str, value: &str) -> Result<(), ApiError> {
    let fine = abode_control::tags::is_label(value);
    if fine {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "{field} must be 1-64 of a-z A-Z 0-9 - _ ."
        )))
    }
}

/// A daemon's call: its key, the caller it introduces itself as, and the
/// JSON body, read and checked in one place for every route.
pub(crate) struct DaemonCall<T> {
    caller: DaemonCaller,
    body: T,
}

/// A request body that says who calls.
trait Introduced {
    fn hello(&self) -> &DaemonHello;
}

macro_rules! introduced {
    ($($type:ty => |$this:ident| $hello:expr),* $(,)?) => {
        $(impl Introduced for $type {
            fn hello(&self) -> &DaemonHello {
                let $this = self;
                $hello
            }
        })*
    };
}

introduced!(
    DaemonHello => |this| this,
    AcquireRequest => |this| &this.hello,
    LogUpload => |this| &this.hello,
    JudgeRequest => |this| &this.hello,
    StateUpload => |this| &this.hello,
    CompleteRequest => |this| &this.hello,
    ReleaseRequest => |this| &this.hello,
);

#[axum::async_trait]
impl<T> axum::extract::FromRequest<AppState> for DaemonCall<T>
where
    T: DeserializeOwned + Introduced + Send,
{
    type Rejection = ApiError;

    async fn from_request(
        request: axum::extract::Request,
        state: &AppState,
    ) -> Result<Self, ApiError> {
        let (mut parts, body) = request.into_parts();
        let key = DaemonKey::from_request_parts(&mut parts, state).await?;
        // Whether the key's daemons may speak for the build at all, before
        // a byte of the body is read (a daemon that lost the build may still
        // be sending a large log or state).
        if let Some(need) = need_of(&parts) {
            let Path(build) = Path::<String>::from_request_parts(&mut parts, state)
                .await
                .map_err(|_| ApiError::bad_request("not a build's job"))?;
            state
                .host
                .daemon_may_call_about(&key.0.id, &build, need)
                .await?;
        }
        // Its turn to be read: the declared length (or the limit, when it
        // is sent in chunks) counts against what all large bodies may take.
        // A small one (a heartbeat, an end, a few log lines) never waits
        // behind large uploads: a heartbeat that waited could lose a lease.
        let declared = parts
            .headers
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<usize>().ok())
            .unwrap_or(MAX_DAEMON_BODY)
            .min(MAX_DAEMON_BODY);
        let _turn = if declared > SMALL_DAEMON_BODY {
            let kib = u32::try_from(declared.div_ceil(1024)).unwrap_or(u32::MAX);
            Some(DAEMON_BODIES.acquire_many(kib).await.map_err(|_| {
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the server is stopping",
                )
            })?)
        } else {
            None
        };
        let request = axum::extract::Request::from_parts(parts, body);
        let bytes =
            Bytes::from_request(request, state)
                .await
                .map_err(|error: BytesRejection| {
                    if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
                        ApiError::new(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            "payload_too_large",
                            format!(
                                "the request body is over this endpoint's limit of {} MiB",
                                MAX_DAEMON_BODY / 1024 / 1024
                            ),
                        )
                    } else {
                        ApiError::bad_request(format!("cannot read the body: {error}"))
                    }
                })?;
        let body: T = serde_json::from_slice(&bytes)
            .map_err(|error| ApiError::bad_request(format!("invalid JSON body: {error}")))?;
        let caller = key.caller(body.hello())?;
        Ok(DaemonCall { caller, body })
    }
}

async fn acquire(
    State(state): State<AppState>,
    DaemonCall {
        caller,
        body: request,
    }: DaemonCall<AcquireRequest>,
) -> Result<Response, ApiError> {
    let wait = Duration::from_secs(request.wait_seconds.unwrap_or(0));
    let acquired = state
        .host
        .acquire_daemon_job(
            &caller,
            &request.tags,
            &request.hello.slot,
            &request.hello.version,
            wait,
        )
        .await?;
    Ok(match acquired {
        Some(job) => Json(JobWire::from_inputs(job.kind, job.inputs)).into_response(),
        None => StatusCode::NO_CONTENT.into_response(),
    })
}

async fn heartbeat(
    State(state): State<AppState>,
    Path(build): Path<String>,
    DaemonCall {
        caller,
        body: hello,
    }: DaemonCall<DaemonHello>,
) -> Result<Response, ApiError> {
    let canceled = state
        .host
        .daemon_heartbeat(&caller, &build, &hello.slot, &hello.version)
        .await?;
    Ok(Json(HeartbeatAnswer { canceled }).into_response())
}

async fn logs(
    State(state): State<AppState>,
    Path(build): Path<String>,
    DaemonCall {
        caller,
        body: upload,
    }: DaemonCall<LogUpload>,
) -> Result<Response, ApiError> {
    state
        .host
        .daemon_log(&caller, &build, &upload.lines)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn judge(
    State(state): State<AppState>,
    Path(build): Path<String>,
    DaemonCall {
        caller,
        body: request,
    }: DaemonCall<JudgeRequest>,
) -> Result<Response, ApiError> {
    let plan_json =
        abode_protocol::decode("plan_json", &request.plan_json).map_err(ApiError::bad_request)?;
    let plan = abode_protocol::decode("plan", &request.plan).map_err(ApiError::bad_request)?;
    let verdict = state
        .host
        .daemon_judge(&caller, &build, plan_json, plan)
        .await?;
    Ok(Json(VerdictWire::from(&verdict)).into_response())
}

async fn state(
    State(state): State<AppState>,
    Path(build): Path<String>,
    DaemonCall {
        caller,
        body: upload,
    }: DaemonCall<StateUpload>,
) -> Result<Response, ApiError> {
    let bytes = abode_protocol::decode("state", &upload.state).map_err(ApiError::bad_request)?;
    let kept = state
        .host
        .daemon_keep_state(&caller, &build, bytes, upload.secret.as_deref())
        .await?;
    Ok(Json(StateAnswer::from(&kept)).into_response())
}

async fn applied(
    State(state): State<AppState>,
    Path(build): Path<String>,
    DaemonCall { caller, .. }: DaemonCall<DaemonHello>,
) -> Result<Response, ApiError> {
    state.host.daemon_applied(&caller, &build).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// One step of the agents' shutdown scripts before the daemon's apply.
async fn shutdown(
    State(state): State<AppState>,
    Path(build): Path<String>,
    DaemonCall { caller, .. }: DaemonCall<DaemonHello>,
) -> Result<Response, ApiError> {
    let done = state.host.daemon_shut_down_agents(&caller, &build).await?;
    Ok(Json(abode_protocol::ShutdownAnswer { done }).into_response())
}

/// The archive of a volume a daemon's run took before applying a confirmed
/// plan (its snapshot order `index`), streamed as the body; the caller in
/// the query. Checked like every daemon call before a byte is read.
async fn snapshot(
    State(state): State<AppState>,
    Path((build, index)): Path<(String, String)>,
    hello: Result<Query<DaemonHello>, QueryRejection>,
    key: DaemonKey,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    state
        .host
        .daemon_may_call_about(&key.0.id, &build, DaemonNeed::Holding)
        .await?;
    let Query(hello) = hello.map_err(|error| {
        ApiError::bad_request(format!(
            "the query must name the caller (daemon_id, slot, version): {error}"
        ))
    })?;
    let caller = key.caller(&hello)?;
    let index: u32 = index
        .parse()
        .map_err(|_| ApiError::bad_request("a snapshot's index is a number"))?;
    let body = request.into_body().into_data_stream();
    let kept = state
        .host
        .daemon_keep_snapshot(&caller, &build, index, body)
        .await?;
    Ok(Json(kept).into_response())
}

/// The run's Terraform ended: its state lock goes, whether or not the
/// daemon still holds the build's lease (the run's secret is the proof).
async fn release(
    State(state): State<AppState>,
    Path(build): Path<String>,
    DaemonCall {
        caller,
        body: request,
    }: DaemonCall<ReleaseRequest>,
) -> Result<Response, ApiError> {
    let released = state
        .host
        .daemon_release_state_lock(&caller, &build, request.secret.as_deref())
        .await?;
    Ok(Json(abode_protocol::ReleaseAnswer { released }).into_response())
}

async fn complete(
    State(state): State<AppState>,
    Path(build): Path<String>,
    DaemonCall {
        caller,
        body: request,
    }: DaemonCall<CompleteRequest>,
) -> Result<Response, ApiError> {
    let outcome = request.outcome().map_err(ApiError::bad_request)?;
    let status = state
        .host
        .daemon_complete(&caller, &build, outcome, request.timings())
        .await?;
    Ok(Json(abode_protocol::CompleteAnswer {
        status: status.as_str().to_string(),
    })
    .into_response())
}
