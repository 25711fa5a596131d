//! The WebSocket routes of connections into workspaces (docs/ssh.md):
//!
//! - `GET /agent/connect`: a running agent's long-lived tunnel (agent
//!   token). Its messages are [`abode_tunnel`] frames; the server opens a
//!   stream on it for each person's connection. One tunnel per agent token:
//!   a newer connection wins and the older one is closed (close code
//!   [`abode_tunnel::CLOSE_REPLACED`]); a tunnel whose agent is no longer
//!   its workspace's is closed too ([`abode_tunnel::CLOSE_GONE`]).
//! - `GET /workspaces/{ws}/connect?kind=ssh|port-forward|pty[&port=N][&agent=NAME]`
//!   (`pty` with `&session=ID&rows=R&cols=C[&offset=N]`): a person's
//!   connection (session or API token; or the dashboard's session cookie
//!   from a page of the access URL's origin, for the web terminal),
//!   authorized, audited and piped to one stream of the workspace's agent.
//!   Binary messages carry the bytes; an empty binary message says "no more
//!   from this side" (a half-close, which TCP forwarding needs).
//! - `GET /agent/streams` (agent token, the ticket in
//!   `x-abode-stream-ticket`, `Upgrade: abode-stream`):
//!   an agent dialing back for one stream the server asked it to
//!   ([`abode_tunnel::dial_back`]); after the `101` the connection is the
//!   stream's bytes, handed to the request that waits for it.
//!
//! Every refusal is an ordinary JSON answer before the upgrade: the stream
//! to the agent is opened first, so a client never sees a 101 for a
//! connection that cannot work.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::sync::mpsc;

use abode_control::connections::{AgentStream, ConnectRequest, Connection, Eviction};
use abode_tunnel::{dial_back, frame, Mux, Side, StreamKind};

use crate::ws_upgrade::{lists, BufferedUpgrade};
use crate::{ApiError, AppState};
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame as TunnelCloseFrame;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message as TunnelMessage;

/// How often the server pings an agent's tunnel (and a person's
/// connection); one silent for [`AGENT_SILENCE`] is dropped (an agent then
/// reconnects).
const AGENT_PING: Duration = Duration::from_secs(15);
const AGENT_SILENCE: Duration = Duration::from_secs(60);
/// How often an agent's tunnel is checked against the store: a tunnel whose
/// agent is no longer its workspace's (the workspace stopped, a build
/// replaced the agent) is closed even when nobody tries to connect.
const AGENT_CHECK: Duration = Duration::from_secs(30);
/// How often a person's connection checks its token again when nothing
/// told this server of a revocation (a suspension on another server).
const PERSON_CHECK: Duration = Duration::from_secs(15);
/// Largest message accepted on either socket: a tunnel frame (its data
/// plus its header) or a chunk of a person's bytes.
const MAX_MESSAGE: usize = frame::HEADER + frame::MAX_DATA;
/// At most this many queued frames after the first go out in one write.
const BATCH: usize = 32;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/agent/connect", get(agent_connect))
        .route("/agent/streams", get(agent_stream))
        .route("/workspaces/:workspace/connect", get(workspace_connect))
}

fn upgrade_required(what: &str) -> ApiError {
    ApiError::new(
        StatusCode::UPGRADE_REQUIRED,
        "upgrade_required",
        format!("{what} is a WebSocket endpoint: send an Upgrade: websocket request"),
    )
}

/// An agent authenticated by its token, with the token (its tunnel is
/// registered under it: the same token connecting again replaces it).
struct AgentWithToken {
    agent: abode_store::Agent,
    token: String,
}

#[axum::async_trait]
impl FromRequestParts<AppState> for AgentWithToken {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = crate::bearer(parts).ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "missing agent token",
            )
        })?;
        let agent = state.control.agents().authenticate_agent(&token).await?;
        Ok(AgentWithToken { agent, token })
    }
}

async fn agent_connect(
    State(state): State<AppState>,
    AgentWithToken { agent, token }: AgentWithToken,
    headers: HeaderMap,
    upgrade: Option<BufferedUpgrade>,
) -> Result<Response, ApiError> {
    let upgrade = upgrade.ok_or_else(|| upgrade_required("/agent/connect"))?;
    // An agent from before larger frames and windows says nothing, and
    // gets the frames and window it takes.
    let agent_limits = frame::PeerLimits::from_header(
        headers
            .get(frame::MAX_DATA_HEADER)
            .and_then(|value| value.to_str().ok()),
    );
    // A tunnel's frames are read in large pieces (`ws_upgrade.rs`): a
    // download through it is a stream of its largest frames.
    let config = WebSocketConfig {
        max_message_size: Some(MAX_MESSAGE),
        max_frame_size: Some(MAX_MESSAGE),
        ..WebSocketConfig::default()
    };
    let dials_back = headers
        .get(dial_back::DIAL_BACK_HEADER)
        .is_some_and(|value| value.as_bytes() == b"1");
    let mut response = upgrade.on_upgrade(config, move |socket| async move {
            let (outgoing, mut to_agent) = mpsc::channel::<Vec<u8>>(64);
            let (from_agent, incoming) = mpsc::channel::<Vec<u8>>(64);
            let (mux, accept, task) =
                Mux::start_with_peer(Side::Server, agent_limits, incoming, outgoing);
            if dials_back {
                mux.set_peer_dials_back();
            }
            // Only the server opens streams: one the agent opens is reset.
            drop(accept);
            let mut registered = state.control.connections().agent_tunnel_up(&agent, &token, mux);
            drop(token);
            if registered.replaced_another() {
                tracing::warn!(
                    agent = %agent.name,
                    workspace = %agent.workspace_id,
                    "agent tunnel up, replacing an older connection with the same agent token (closing it)"
                );
            } else {
                tracing::info!(agent = %agent.name, workspace = %agent.workspace_id, "agent tunnel up");
            }
            let (mut sink, mut source) = socket.split();
            let mut ping = tokio::time::interval(AGENT_PING);
            let mut check = tokio::time::interval(AGENT_CHECK);
            check.reset();
            // Any message counts (the agent pings too): a connection that
            // went silent without closing (a cut network) is dropped.
            let mut last_heard = tokio::time::Instant::now();
            let eviction = loop {
                tokio::select! {
                    message = source.next() => {
                        last_heard = tokio::time::Instant::now();
                        match message {
                            Some(Ok(TunnelMessage::Binary(bytes))) => {
                                if from_agent.send(bytes).await.is_err() {
                                    break None;
                                }
                            }
                            Some(Ok(TunnelMessage::Close(_))) | Some(Err(_)) | None => break None,
                            Some(Ok(_)) => {}
                        }
                    },
                    frame = to_agent.recv() => match frame {
                        Some(frame) => {
                            if send_queued(&mut sink, frame, &mut to_agent).await.is_err() {
                                break None;
                            }
                        }
                        None => break None,
                    },
                    _ = ping.tick() => {
                        if last_heard.elapsed() > AGENT_SILENCE
                            || sink.send(TunnelMessage::Ping(Vec::new())).await.is_err()
                        {
                            break None;
                        }
                    }
                    _ = check.tick() => {
                        if !registered.still_current(&agent.workspace_id).await {
                            break Some(Eviction::Gone);
                        }
                    }
                    why = registered.evicted() => break Some(why),
                }
            };
            if let Some(why) = eviction {
                tracing::warn!(
                    agent = %agent.name,
                    workspace = %agent.workspace_id,
                    reason = why.reason(),
                    "closing an agent tunnel"
                );
                let close = TunnelCloseFrame {
                    code: why.close_code().into(),
                    reason: why.reason().into(),
                };
                let _ = sink.send(TunnelMessage::Close(Some(close))).await;
            }
            drop(registered);
            drop(from_agent);
            if let Ok(Err(error)) = task.await {
                tracing::warn!(%error, agent = %agent.name, "agent tunnel ended with an error");
            }
            tracing::info!(agent = %agent.name, workspace = %agent.workspace_id, "agent tunnel down");
        });
    // What this server takes, for the agent to send as much.
    response
        .headers_mut()
        .insert(frame::MAX_DATA_HEADER, HeaderValue::from(frame::MAX_DATA));
    response
        .headers_mut()
        .insert(dial_back::DIAL_BACK_HEADER, HeaderValue::from_static("1"));
    Ok(response)
}

/// An agent's connection for one stream (its ticket): switched to the
/// stream's bytes and handed to the request waiting for it. A ticket this
/// server does not wait for (or another agent's) is a 404, after which the
/// agent carries the stream on its tunnel.
async fn agent_stream(
    State(state): State<AppState>,
    AgentWithToken { agent, .. }: AgentWithToken,
    mut request: axum::extract::Request,
) -> Result<Response, ApiError> {
    let headers = request.headers();
    let ticket = headers
        .get(dial_back::TICKET_HEADER)
        .and_then(|value| value.to_str().ok())
        .filter(|ticket| dial_back::is_ticket(ticket))
        .map(str::to_string)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!(
                    "a dial-back names its stream's ticket in {} (64 hex digits)",
                    dial_back::TICKET_HEADER
                ),
            )
        })?;
    if !lists(headers, header::CONNECTION, "upgrade")
        || !lists(headers, header::UPGRADE, dial_back::UPGRADE_PROTOCOL)
    {
        return Err(ApiError::new(
            StatusCode::UPGRADE_REQUIRED,
            "upgrade_required",
            format!(
                "/agent/streams switches protocols: send Connection: upgrade and Upgrade: {}",
                dial_back::UPGRADE_PROTOCOL
            ),
        ));
    }
    let on_upgrade = request
        .extensions_mut()
        .remove::<hyper::upgrade::OnUpgrade>()
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::UPGRADE_REQUIRED,
                "upgrade_required",
                "this connection cannot switch protocols",
            )
        })?;
    let deliver = state
        .control
        .connections()
        .dialed_back(&agent, &ticket)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "no stream on this server waits for this ticket",
            )
        })?;
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let stream: abode_tunnel::BoxedStream =
                    Box::new(hyper_util::rt::TokioIo::new(upgraded));
                // The request may have given up meanwhile: the connection
                // then closes here.
                let _ = deliver.send(stream);
            }
            Err(error) => tracing::debug!(%error, "an agent's dial-back did not switch protocols"),
        }
    });
    Ok((
        StatusCode::SWITCHING_PROTOCOLS,
        [
            (header::CONNECTION, HeaderValue::from_static("upgrade")),
            (
                header::UPGRADE,
                HeaderValue::from_static(dial_back::UPGRADE_PROTOCOL),
            ),
        ],
    )
        .into_response())
}

/// Frames queued together leave in one write: `frame`, then whatever else
/// is already waiting (up to a bound, so the pings still get their turn),
/// then one flush. A bulk copy otherwise pays a system call and a wake-up
/// of the agent per frame.
async fn send_queued<S, M>(
    sink: &mut S,
    frame: Vec<u8>,
    queue: &mut mpsc::Receiver<Vec<u8>>,
) -> Result<(), S::Error>
where
    S: futures_util::Sink<M> + Unpin,
    M: From<Vec<u8>>,
{
    sink.feed(M::from(frame)).await?;
    for _ in 0..BATCH {
        match queue.try_recv() {
            Ok(frame) => sink.feed(M::from(frame)).await?,
            Err(_) => break,
        }
    }
    sink.flush().await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectQuery {
    kind: String,
    port: Option<u16>,
    agent: Option<String>,
    session: Option<String>,
    rows: Option<u16>,
    cols: Option<u16>,
    offset: Option<u64>,
    /// An app with a command: the terminal runs it (`pty` only).
    app: Option<String>,
}

impl ConnectQuery {
    /// The terminal a `pty` connection asks for; the control plane refuses
    /// one that is incomplete, or given for another kind.
    fn terminal(&self) -> Option<abode_tunnel::TerminalOpen> {
        if self.session.is_none() && self.rows.is_none() && self.cols.is_none() {
            return None;
        }
        Some(abode_tunnel::TerminalOpen {
            session: self.session.clone().unwrap_or_default(),
            rows: self.rows.unwrap_or(0),
            cols: self.cols.unwrap_or(0),
            offset: self.offset.unwrap_or(0),
            command: None,
        })
    }
}

/// A person's connection and the token that opened it: a bearer token, or
/// the dashboard's session cookie sent by a browser (which always says its
/// `Origin` on a WebSocket; the request checks refuse a WebSocket from
/// another origin, so a page elsewhere cannot ride on the cookie).
struct Connecting {
    caller: abode_control::Caller,
    token: String,
}

#[axum::async_trait]
impl FromRequestParts<AppState> for Connecting {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let from_browser = parts.headers.contains_key(axum::http::header::ORIGIN);
        let token = match crate::extract::bearer(parts) {
            Some(token) => token,
            None => from_browser
                .then(|| abode_web::session_cookie(&parts.headers))
                .flatten()
                .ok_or_else(|| {
                    ApiError::new(
                        StatusCode::UNAUTHORIZED,
                        "unauthorized",
                        "missing session token: log in first (Authorization: Bearer <token>)",
                    )
                })?,
        };
        let caller = state
            .control
            .identity()
            .authenticate_caller(&token, crate::extract::request_id(parts))
            .await?;
        Ok(Connecting { caller, token })
    }
}

async fn workspace_connect(
    State(state): State<AppState>,
    Connecting { caller, token }: Connecting,
    Path(workspace): Path<String>,
    Query(query): Query<ConnectQuery>,
    headers: HeaderMap,
    upgrade: Option<WebSocketUpgrade>,
) -> Result<Response, ApiError> {
    let kind: StreamKind = query.kind.parse().map_err(ApiError::bad_request)?;
    let request = ConnectRequest {
        kind,
        port: query.port,
        agent: query.agent.clone(),
        terminal: query.terminal(),
        app: query.app.clone(),
    };
    let may_relay = !crate::relay::is_relayed(&headers);
    let Some(upgrade) = upgrade else {
        // Everything a connection would be refused for, then the 426.
        state
            .control
            .connections()
            .check_connect(&caller, &workspace, &request)
            .await?;
        return Err(upgrade_required("/workspaces/{ws}/connect"));
    };
    let connection = state
        .control
        .connections()
        .connect_workspace(&caller, &workspace, &request, may_relay)
        .await?;
    let upgrade = upgrade.max_message_size(MAX_MESSAGE);
    Ok(match connection {
        Connection::Here(stream, end) => upgrade.on_upgrade(move |socket| async move {
            tokio::select! {
                () = pipe(socket, stream) => {}
                () = until_refused(&state, token) => {
                    tracing::info!(workspace = %workspace, "closing a connection whose credential no longer holds");
                }
            }
            end.ended().await;
        }),
        Connection::Elsewhere(relay_url) => {
            let target = crate::relay::RelayTarget {
                relay_url: &relay_url,
                workspace: &workspace,
                kind: kind.as_str(),
                port: query.port,
                agent: query.agent.as_deref(),
                terminal: request.terminal.as_ref(),
            };
            // Opened before the upgrade: a refusal there is answered here.
            let upstream = crate::relay::open(&target, &token).await?;
            upgrade.on_upgrade(move |socket| async move {
                tokio::select! {
                    () = crate::relay::pipe(socket, upstream) => {}
                    () = until_refused(&state, token) => {}
                }
            })
        }
    }
    .into_response())
}

/// Ends when the connection's token stops opening anything: logged out,
/// revoked, expired, or its account suspended or deleted. Looks again at
/// each revocation this server makes, and every [`PERSON_CHECK`] for those
/// made elsewhere.
async fn until_refused(state: &AppState, token: String) {
    let identity = state.control.identity();
    let mut revocations = identity.revocations();
    let mut check = tokio::time::interval(PERSON_CHECK);
    check.reset();
    loop {
        tokio::select! {
            changed = revocations.changed() => {
                if changed.is_err() {
                    return std::future::pending().await;
                }
            }
            _ = check.tick() => {}
        }
        // Only a refusal ends it: a database hiccup does not cut people off.
        if let Err(abode_control::IdentityError::Unauthorized(_)) =
            identity.authenticate(&token).await
        {
            return;
        }
    }
}

/// Moves bytes between a person's socket and the stream to the agent until
/// both sides are done, the person's socket closes, or it stays silent (no
/// answer to the pings) for [`AGENT_SILENCE`]: a client that vanished does
/// not keep its connection, nor the workspace's activity, alive.
///
/// The person's messages go to the tunnel as they are, and the tunnel's
/// frames to the person: no pipe between. The two directions are separate
/// futures, so one waiting for the agent's credit never stops the other
/// (an SSH server blocked on its output would otherwise never read the
/// input that unblocks it).
async fn pipe(socket: WebSocket, (mut to_agent, mut from_agent): AgentStream) {
    let (mut sink, mut source) = socket.split();
    let started = tokio::time::Instant::now();
    // When the person was last heard from (ms after `started`).
    let last_heard = AtomicU64::new(0);
    let (person_done, mut person_done_seen) = tokio::sync::watch::channel(false);
    // Ends when the person's socket does.
    let upstream = async {
        let mut forwarding = true;
        while let Some(Ok(message)) = source.next().await {
            let heard = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            last_heard.store(heard, Ordering::Relaxed);
            match message {
                Message::Binary(bytes) if forwarding => {
                    if bytes.is_empty() {
                        forwarding = false;
                        let _ = to_agent.finish().await;
                        let _ = person_done.send(true);
                    } else if to_agent.send(&bytes).await.is_err() {
                        forwarding = false;
                        let _ = person_done.send(true);
                    }
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
    };
    // Ends when both sides are done, or the person went silent.
    let downstream = async {
        let mut ping = tokio::time::interval(AGENT_PING);
        let mut agent_done = false;
        loop {
            if agent_done && *person_done_seen.borrow() {
                return;
            }
            tokio::select! {
                bytes = from_agent.recv(), if !agent_done => {
                    let sent = match bytes {
                        // What else arrived already leaves in the same write.
                        Some(bytes) => {
                            let mut fed = sink.feed(Message::Binary(bytes)).await;
                            for _ in 0..BATCH {
                                let Some(bytes) = from_agent.try_recv().await else { break };
                                if fed.is_err() {
                                    break;
                                }
                                fed = sink.feed(Message::Binary(bytes)).await;
                            }
                            match fed {
                                Ok(()) => sink.flush().await,
                                Err(error) => Err(error),
                            }
                        }
                        None => {
                            agent_done = true;
                            // "No more from here"; the person says when
                            // they are done.
                            sink.send(Message::Binary(Vec::new())).await
                        }
                    };
                    if sent.is_err() {
                        return;
                    }
                }
                changed = person_done_seen.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                _ = ping.tick() => {
                    let heard = Duration::from_millis(last_heard.load(Ordering::Relaxed));
                    if started.elapsed().saturating_sub(heard) > AGENT_SILENCE
                        || sink.send(Message::Ping(Vec::new())).await.is_err()
                    {
                        return;
                    }
                }
            }
        }
    };
    tokio::select! {
        () = upstream => {}
        () = downstream => {}
    }
}
