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
use abode_tunnel::{Mux, Side, StreamKind};

use crate::{ApiError, AppState, Authenticated, AuthenticatedAgent};

/// How often the server pings an agent's tunnel; a tunnel silent for
/// [`AGENT_SILENCE`] is dropped (the agent reconnects).
const AGENT_PING: Duration = Duration::from_secs(15);
const AGENT_SILENCE: Duration = Duration::from_secs(60);
/// Largest message accepted on either socket: a tunnel frame (32 KiB of
/// data plus its header) or a chunk of a person's bytes.
const MAX_MESSAGE: usize = 64 * 1024;

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
            let (mux, _accept, task) = Mux::start(Side::Server, incoming, outgoing);
            let registered = state.control.agent_tunnel_up(&agent, mux);
            tracing::info!(agent = %agent.name, workspace = %agent.workspace_id, "agent tunnel up");
            let (mut sink, mut source) = socket.split();
            let mut ping = tokio::time::interval(AGENT_PING);
            loop {
                tokio::select! {
                    message = tokio::time::timeout(AGENT_SILENCE, source.next()) => match message {
                        Ok(Some(Ok(Message::Binary(bytes)))) => {
                            if from_agent.send(bytes).await.is_err() {
                                break;
                            }
                        }
                        Ok(Some(Ok(Message::Close(_)))) | Ok(Some(Err(_))) | Ok(None) | Err(_) => break,
                        Ok(Some(Ok(_))) => {}
                    },
                    frame = to_agent.recv() => match frame {
                        Some(frame) => {
                            if sink.send(Message::Binary(frame)).await.is_err() {
                                break;
                            }
                        }
                        None => break,
                    },
                    _ = ping.tick() => {
                        if sink.send(Message::Ping(Vec::new())).await.is_err() {
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
/// both sides are done, or the person's socket is gone.
async fn pipe(socket: WebSocket, stream: DuplexStream) {
    let (mut read, mut write) = tokio::io::split(stream);
    let (mut sink, mut source) = socket.split();
    // True when the client is gone (closed, failed), false at its half-close.
    let upstream = async {
        let mut gone = true;
        while let Some(Ok(message)) = source.next().await {
            match message {
                Message::Binary(bytes) if bytes.is_empty() => {
                    gone = false;
                    break;
                }
                Message::Binary(bytes) => {
                    let written = write.write_all(&bytes).await;
                    if written.is_err() {
                        break;
                    }
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
        let _ = write.shutdown().await;
        gone
    };
    let downstream = async {
        let mut buffer = vec![0u8; 32 * 1024];
        loop {
            match read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if sink
                        .send(Message::Binary(buffer[..n].to_vec()))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
        // "No more from here"; the client closes the socket when it is
        // done with its own direction.
        let _ = sink.send(Message::Binary(Vec::new())).await;
    };
    let mut upstream = std::pin::pin!(upstream);
    let mut downstream = std::pin::pin!(downstream);
    tokio::select! {
        gone = &mut upstream => {
            if !gone {
                downstream.await;
            }
        }
        () = &mut downstream => {
            upstream.await;
        }
    }
}
