//! The WebSocket routes of connections into workspaces (docs/ssh.md):
//!
//! - `GET /agent/connect`: a running agent's long-lived tunnel (agent
//!   token). Its messages are [`abode_tunnel`] frames; the server opens a
//!   stream on it for each person's connection.
//! - `GET /workspaces/{ws}/connect?kind=ssh|port-forward[&port=N][&agent=NAME]`:
//!   a person's connection (session or API token), authorized, audited and
//!   piped to one stream of the workspace's agent. Binary messages carry the
//!   bytes; an empty binary message says "no more from this side" (a
//!   half-close, which TCP forwarding needs).
//!
//! Every refusal is an ordinary JSON answer before the upgrade: the stream
//! to the agent is opened first, so a client never sees a 101 for a
//! connection that cannot work.

use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

use abode_control::connections::ConnectRequest;
use abode_tunnel::{frame, Mux, Side, StreamKind};

use crate::{ApiError, AppState, Authenticated, AuthenticatedAgent};

/// How often the server pings an agent's tunnel (and a person's
/// connection); one silent for [`AGENT_SILENCE`] is dropped (an agent then
/// reconnects).
const AGENT_PING: Duration = Duration::from_secs(15);
const AGENT_SILENCE: Duration = Duration::from_secs(60);
/// Largest message accepted on either socket: a tunnel frame (its data
/// plus its header) or a chunk of a person's bytes.
const MAX_MESSAGE: usize = frame::HEADER + frame::MAX_DATA;
/// At most this many queued frames after the first go out in one write.
const BATCH: usize = 32;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/agent/connect", get(agent_connect))
        .route("/workspaces/:workspace/connect", get(workspace_connect))
}

fn upgrade_required(what: &str) -> ApiError {
    ApiError::new(
        StatusCode::UPGRADE_REQUIRED,
        "upgrade_required",
        format!("{what} is a WebSocket endpoint: send an Upgrade: websocket request"),
    )
}

async fn agent_connect(
    State(state): State<AppState>,
    AuthenticatedAgent(agent): AuthenticatedAgent,
    upgrade: Option<WebSocketUpgrade>,
) -> Result<Response, ApiError> {
    let upgrade = upgrade.ok_or_else(|| upgrade_required("/agent/connect"))?;
    Ok(upgrade
        .max_message_size(MAX_MESSAGE)
        .on_upgrade(move |socket| async move {
            let (outgoing, mut to_agent) = mpsc::channel::<Vec<u8>>(64);
            let (from_agent, incoming) = mpsc::channel::<Vec<u8>>(64);
            let (mux, accept, task) = Mux::start(Side::Server, incoming, outgoing);
            // Only the server opens streams: one the agent opens is reset.
            drop(accept);
            let registered = state.control.agent_tunnel_up(&agent, mux);
            tracing::info!(agent = %agent.name, workspace = %agent.workspace_id, "agent tunnel up");
            let (mut sink, mut source) = socket.split();
            let mut ping = tokio::time::interval(AGENT_PING);
            // Any message counts (the agent pings too): a connection that
            // went silent without closing (a cut network) is dropped.
            let mut last_heard = tokio::time::Instant::now();
            loop {
                tokio::select! {
                    message = source.next() => {
                        last_heard = tokio::time::Instant::now();
                        match message {
                            Some(Ok(Message::Binary(bytes))) => {
                                if from_agent.send(bytes).await.is_err() {
                                    break;
                                }
                            }
                            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                            Some(Ok(_)) => {}
                        }
                    },
                    frame = to_agent.recv() => match frame {
                        Some(frame) => {
                            if send_queued(&mut sink, frame, &mut to_agent).await.is_err() {
                                break;
                            }
                        }
                        None => break,
                    },
                    _ = ping.tick() => {
                        if last_heard.elapsed() > AGENT_SILENCE
                            || sink.send(Message::Ping(Vec::new())).await.is_err()
                        {
                            break;
                        }
                    }
                }
            }
            drop(registered);
            drop(from_agent);
            if let Ok(Err(error)) = task.await {
                tracing::warn!(%error, agent = %agent.name, "agent tunnel ended with an error");
            }
            tracing::info!(agent = %agent.name, workspace = %agent.workspace_id, "agent tunnel down");
        }))
}

/// Frames queued together leave in one write: `frame`, then whatever else
/// is already waiting (up to a bound, so the pings still get their turn),
/// then one flush. A bulk copy otherwise pays a system call and a wake-up
/// of the agent per frame.
async fn send_queued<S>(
    sink: &mut S,
    frame: Vec<u8>,
    queue: &mut mpsc::Receiver<Vec<u8>>,
) -> Result<(), S::Error>
where
    S: futures_util::Sink<Message> + Unpin,
{
    sink.feed(Message::Binary(frame)).await?;
    for _ in 0..BATCH {
        match queue.try_recv() {
            Ok(frame) => sink.feed(Message::Binary(frame)).await?,
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
}

async fn workspace_connect(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(workspace): Path<String>,
    Query(query): Query<ConnectQuery>,
    upgrade: Option<WebSocketUpgrade>,
) -> Result<Response, ApiError> {
    let kind: StreamKind = query.kind.parse().map_err(ApiError::bad_request)?;
    let request = ConnectRequest {
        kind,
        port: query.port,
        agent: query.agent,
    };
    let Some(upgrade) = upgrade else {
        // Everything a connection would be refused for, then the 426.
        state
            .control
            .check_connect(&caller, &workspace, &request)
            .await?;
        return Err(upgrade_required("/workspaces/{ws}/connect"));
    };
    let (stream, end) = state
        .control
        .connect_workspace(&caller, &workspace, &request)
        .await?;
    Ok(upgrade
        .max_message_size(MAX_MESSAGE)
        .on_upgrade(move |socket| async move {
            pipe(socket, stream).await;
            end.ended().await;
        })
        .into_response())
}

/// Moves bytes between a person's socket and the stream to the agent until
/// both sides are done, the person's socket closes, or it stays silent (no
/// answer to the pings) for [`AGENT_SILENCE`]: a client that vanished does
/// not keep its connection, nor the workspace's activity, alive.
async fn pipe(socket: WebSocket, stream: DuplexStream) {
    let (mut read, mut write) = tokio::io::split(stream);
    let (mut sink, mut source) = socket.split();
    let mut ping = tokio::time::interval(AGENT_PING);
    let mut last_heard = tokio::time::Instant::now();
    let mut buffer = vec![0u8; frame::MAX_DATA];
    // Whether each direction still carries bytes: from the person, to them.
    let (mut upstream, mut downstream) = (true, true);
    while upstream || downstream {
        tokio::select! {
            message = source.next() => {
                last_heard = tokio::time::Instant::now();
                match message {
                    Some(Ok(Message::Binary(bytes))) if upstream => {
                        if bytes.is_empty() {
                            upstream = false;
                            let _ = write.shutdown().await;
                        } else if write.write_all(&bytes).await.is_err() {
                            upstream = false;
                        }
                    }
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                    Some(Ok(_)) => {}
                }
            }
            read = read.read(&mut buffer), if downstream => match read {
                Ok(0) | Err(_) => {
                    downstream = false;
                    // "No more from here"; the person says when they are done.
                    if sink.send(Message::Binary(Vec::new())).await.is_err() {
                        break;
                    }
                }
                Ok(n) => {
                    if sink.send(Message::Binary(buffer[..n].to_vec())).await.is_err() {
                        break;
                    }
                }
            },
            _ = ping.tick() => {
                if last_heard.elapsed() > AGENT_SILENCE
                    || sink.send(Message::Ping(Vec::new())).await.is_err()
                {
                    break;
                }
            }
        }
    }
    let _ = write.shutdown().await;
}
