//! The WebSockets the gateway carries (docs/ssh.md): an agent's tunnel,
//! glued to an [`abode_tunnel::Mux`] and registered while it lasts, and a
//! person's connection, piped to its stream on the agent's tunnel or to
//! the server that holds that tunnel. The API upgrades the requests; what
//! flows on the sockets is here.
//!
//! Binary messages carry the bytes; an empty binary message says "no more
//! from this side" (a half-close, which TCP forwarding needs).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use abode_control::authz::Action;
use abode_control::{Control, ControlError, IdentityError};
use abode_store::Agent;
use abode_tunnel::{frame, Mux, Side};
use axum::extract::ws::{Message, WebSocket};
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::CloseFrame as TunnelCloseFrame;
use tokio_tungstenite::tungstenite::Message as TunnelMessage;

use crate::connection_log::{ByteCounts, EndReason};
use crate::connections::{AgentStream, Connection};
use crate::relay::{self, Upstream};
use crate::tunnels::{Eviction, Tunnels};

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
pub const MAX_MESSAGE: usize = frame::HEADER + frame::MAX_DATA;
/// At most this many queued frames after the first go out in one write.
const BATCH: usize = 32;

/// An agent's tunnel, as `Gateway::serve_agent_tunnel` takes it.
pub struct AgentSocket {
    pub agent: Agent,
    /// The token it authenticated with: its tunnel is registered under it.
    pub token: String,
    /// The frames and window the agent takes (its header).
    pub limits: frame::PeerLimits,
    /// The agent dials back streams on connections of its own.
    pub dials_back: bool,
}

/// Carries an agent's tunnel on `socket` until it ends or the server closes
/// it: replaced by a newer connection of the same agent, stale (its agent
/// is no longer its workspace's), or silent for [`AGENT_SILENCE`].
pub(crate) async fn serve_agent_tunnel<S, E>(tunnels: &Tunnels, socket: S, tunnel: AgentSocket)
where
    S: Stream<Item = Result<TunnelMessage, E>> + Sink<TunnelMessage> + Unpin,
{
    let AgentSocket {
        agent,
        token,
        limits: agent_limits,
        dials_back,
    } = tunnel;
    let (outgoing, mut to_agent) = mpsc::channel::<Vec<u8>>(64);
    let (from_agent, incoming) = mpsc::channel::<Vec<u8>>(64);
    let (mux, accept, task) = Mux::start_with_peer(Side::Server, agent_limits, incoming, outgoing);
    if dials_back {
        mux.set_peer_dials_back();
    }
    // Only the server opens streams: one the agent opens is reset.
    drop(accept);
    let mut registered = tunnels.agent_tunnel_up(&agent, &token, mux);
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
}

/// What a person's socket is piped to: a stream on this server's tunnel,
/// or the server that holds it.
pub enum Reached {
    Agent(Box<Connection>),
    Server(Box<Upstream>),
}

/// Carries a person's connection until it ends, its token (`token`)
/// stops opening anything, or its person may no longer connect to
/// `workspace` (a share removed, a group left); then audits its end.
pub(crate) async fn carry(
    control: &Control,
    socket: WebSocket,
    reached: Reached,
    token: String,
    workspace: &str,
) {
    match reached {
        Reached::Agent(connection) => {
            let Connection { stream, end } = *connection;
            let bytes = end.bytes().unwrap_or_default();
            let why = tokio::select! {
                why = pipe(socket, stream, &bytes) => why,
                () = until_refused(control, &token, workspace) => {
                    tracing::info!(workspace = %workspace, "closing a connection whose credential no longer holds");
                    EndReason::Refused
                }
            };
            end.ended(why).await;
        }
        Reached::Server(upstream) => {
            tokio::select! {
                () = relay::pipe(socket, *upstream) => {}
                () = until_refused(control, &token, workspace) => {}
            }
        }
    }
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

/// Ends when the connection's token stops opening anything (logged out,
/// revoked, expired, or its account suspended or deleted) or its person
/// may no longer connect to `workspace` (a share of it removed, a group
/// left). Looks again at each revocation or narrowed access this server
/// makes, and every [`PERSON_CHECK`] for those made elsewhere.
async fn until_refused(control: &Control, token: &str, workspace: &str) {
    let identity = control.identity();
    let mut revocations = identity.revocations();
    let mut check = tokio::time::interval(PERSON_CHECK);
    check.reset();
    loop {
        // What woke this check, said when it closes the connection.
        let woken_by = tokio::select! {
            changed = revocations.changed() => {
                if changed.is_err() {
                    return std::future::pending().await;
                }
                "a revocation or narrowed access on this server"
            }
            _ = check.tick() => "the periodic check",
        };
        // Only a refusal ends it: a database hiccup does not cut people off.
        let refused = match identity.authenticate_caller(token, None).await {
            Ok(caller) => matches!(
                control
                    .workspaces()
                    .resolve(&caller, workspace, Action::WorkspaceConnect)
                    .await,
                Err(ControlError::Forbidden(_) | ControlError::NotFound(_))
            ),
            Err(IdentityError::Unauthorized(_)) => true,
            Err(_) => false,
        };
        if refused {
            tracing::info!(
                workspace,
                woken_by,
                "a connection's person may no longer connect: closing it"
            );
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
///
/// The bytes each way are counted in `bytes` as they pass (one relaxed
/// atomic add per message); what it returns is how it ended.
async fn pipe(
    socket: WebSocket,
    (mut to_agent, mut from_agent): AgentStream,
    bytes: &ByteCounts,
) -> EndReason {
    let (mut sink, mut source) = socket.split();
    let started = tokio::time::Instant::now();
    // When the person was last heard from (ms after `started`).
    let last_heard = AtomicU64::new(0);
    let (person_done, mut person_done_seen) = tokio::sync::watch::channel(false);
    let counts = bytes;
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
                    } else {
                        counts.to_workspace(bytes.len());
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
                return EndReason::ClientClosed;
            }
            tokio::select! {
                bytes = from_agent.recv(), if !agent_done => {
                    let sent = match bytes {
                        // What else arrived already leaves in the same write.
                        Some(bytes) => {
                            counts.from_workspace(bytes.len());
                            let mut fed = sink.feed(Message::Binary(bytes)).await;
                            for _ in 0..BATCH {
                                let Some(bytes) = from_agent.try_recv().await else { break };
                                if fed.is_err() {
                                    break;
                                }
                                counts.from_workspace(bytes.len());
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
                        return EndReason::ClientClosed;
                    }
                }
                changed = person_done_seen.changed() => {
                    if changed.is_err() {
                        return EndReason::ClientClosed;
                    }
                }
                _ = ping.tick() => {
                    let heard = Duration::from_millis(last_heard.load(Ordering::Relaxed));
                    if started.elapsed().saturating_sub(heard) > AGENT_SILENCE {
                        return EndReason::Idle;
                    }
                    if sink.send(Message::Ping(Vec::new())).await.is_err() {
                        return EndReason::ClientClosed;
                    }
                }
            }
        }
    };
    tokio::select! {
        () = upstream => EndReason::ClientClosed,
        why = downstream => why,
    }
}
