//! Connections into workspaces (issue 14): the agents' tunnels and the
//! streams people open through them.
//!
//! Each running agent keeps one connection to the server (the API glues its
//! WebSocket to an [`abode_tunnel::Mux`] and registers it here while it
//! lasts). A person's `abode ssh` or `abode port-forward` asks
//! [`Control::connect_workspace`]: the request is authorized like every
//! other action on the workspace (`workspace.connect`: its owner, and the
//! roles the policy grants, recorded as such in the audit log), a stream is
//! opened to the workspace's agent, and the connection and its end are
//! audited with the user, the workspace and the kind. While it is open, the
//! workspace counts as used (its last use and autostop deadline move, once
//! per activity interval, never per byte).
//!
//! Limit: the registry lives in this process. With several servers, a
//! person's connection must reach the server that holds the agent's tunnel
//! (a later issue: forward between servers or route by workspace).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use abode_store::{Agent, Transition, Workspace};
use abode_tunnel::{Mux, StreamKind, StreamRequest};
use rand::RngCore;
use tokio::io::DuplexStream;
use tokio::task::JoinHandle;

use crate::authz::Action;
use crate::schedules::ACTIVITY_THROTTLE;
use crate::{Caller, Control, ControlError};

/// The agents whose tunnel is up in this process, by agent id.
#[derive(Default)]
pub(crate) struct Tunnels {
    agents: Mutex<HashMap<String, LiveAgent>>,
    generation: AtomicU64,
}

struct LiveAgent {
    workspace_id: String,
    name: String,
    /// Which of the agent's connections this is: a reconnect replaces the
    /// entry, and the old connection's end must not remove the new one.
    generation: u64,
    mux: Mux,
}

impl Tunnels {
    fn agents(&self) -> std::sync::MutexGuard<'_, HashMap<String, LiveAgent>> {
        self.agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Keeps an agent's tunnel registered; dropping it (the connection ended)
/// unregisters it.
pub struct AgentTunnel {
    control: Control,
    agent_id: String,
    generation: u64,
}

impl Drop for AgentTunnel {
    fn drop(&mut self) {
        let mut agents = self.control.inner.tunnels.agents();
        if agents
            .get(&self.agent_id)
            .is_some_and(|live| live.generation == self.generation)
        {
            agents.remove(&self.agent_id);
        }
    }
}

/// What a person asks to connect to.
#[derive(Debug, Clone)]
pub struct ConnectRequest {
    pub kind: StreamKind,
    /// The port inside the workspace (`port-forward` only).
    pub port: Option<u16>,
    /// Which agent, when the workspace has several (by name).
    pub agent: Option<String>,
}

/// The bookkeeping of an open connection into a workspace. Its end is
/// audited when it is dropped (the connection ended, or its upgrade never
/// happened), or awaited with [`ConnectionEnd::ended`].
pub struct ConnectionEnd {
    control: Control,
    caller: Caller,
    workspace_id: String,
    target: String,
    details: String,
    started: Instant,
    activity: JoinHandle<()>,
    audited: bool,
}

impl ConnectionEnd {
    /// Audits the end of the connection (`workspace.disconnect`, with how
    /// long it lasted) and stops reporting activity.
    pub async fn ended(mut self) {
        self.audited = true;
        self.activity.abort();
        let (control, caller, workspace_id, target, details) = self.disconnect_event();
        control
            .audit_workspace(
                &caller,
                &workspace_id,
                "workspace.disconnect",
                &target,
                "success",
                Some(details),
            )
            .await;
    }

    fn disconnect_event(&self) -> (Control, Caller, String, String, String) {
        let details = format!(
            "{} duration_ms={}",
            self.details,
            self.started.elapsed().as_millis()
        );
        (
            self.control.clone(),
            self.caller.clone(),
            self.workspace_id.clone(),
            self.target.clone(),
            details,
        )
    }
}

impl Drop for ConnectionEnd {
    fn drop(&mut self) {
        self.activity.abort();
        if self.audited {
            return;
        }
        let (control, caller, workspace_id, target, details) = self.disconnect_event();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                control
                    .audit_workspace(
                        &caller,
                        &workspace_id,
                        "workspace.disconnect",
                        &target,
                        "success",
                        Some(details),
                    )
                    .await;
            });
        }
    }
}

impl Control {
    /// Registers an agent's tunnel; streams to its workspace go through
    /// `mux` until the returned guard is dropped. A newer connection of the
    /// same agent replaces an older one.
    pub fn agent_tunnel_up(&self, agent: &Agent, mux: Mux) -> AgentTunnel {
        let tunnels = &self.inner.tunnels;
        let generation = tunnels.generation.fetch_add(1, Ordering::Relaxed);
        tunnels.agents().insert(
            agent.id.clone(),
            LiveAgent {
                workspace_id: agent.workspace_id.clone(),
                name: agent.name.clone(),
                generation,
                mux,
            },
        );
        AgentTunnel {
            control: self.clone(),
            agent_id: agent.id.clone(),
            generation,
        }
    }

    /// What [`Control::connect_workspace`] would refuse, without
    /// connecting (a request that is not a WebSocket is answered with it).
    pub async fn check_connect(
        &self,
        caller: &Caller,
        reference: &str,
        request: &ConnectRequest,
    ) -> Result<(), ControlError> {
        self.prepare_connection(caller, reference, request)
            .await
            .map(|_| ())
    }

    /// Opens a connection into a workspace for `caller` (`GET
    /// /workspaces/{ws}/connect`): authorized as `workspace.connect`, refused
    /// while the workspace's agent has no tunnel to this server, audited.
    /// The stream to the agent, and what to call when it ends.
    pub async fn connect_workspace(
        &self,
        caller: &Caller,
        reference: &str,
        request: &ConnectRequest,
    ) -> Result<(DuplexStream, ConnectionEnd), ControlError> {
        let (workspace, mux, port) = self.prepare_connection(caller, reference, request).await?;
        let host_key = match request.kind {
            StreamKind::Ssh => Some(self.host_key(&workspace.id).await?),
            StreamKind::PortForward => None,
        };
        let header = StreamRequest {
            kind: request.kind,
            port,
            host_key,
            user: caller.user.username.clone(),
        };
        let header = serde_json::to_vec(&header)
            .map_err(|error| ControlError::Internal(format!("stream header: {error}")))?;
        let stream = mux.open(header).await.map_err(|_| agent_not_connected())?;
        let target = format!("{}/{}", workspace.owner_name, workspace.name);
        let mut details = format!("kind={}", request.kind.as_str());
        if let Some(port) = port {
            details.push_str(&format!(" port={port}"));
        }
        if caller.user.id != workspace.owner_id {
            // Someone other than the owner, through a role that allows it.
            details.push_str(&format!(" not_owner roles={}", caller.roles));
        }
        self.audit_workspace(
            caller,
            &workspace.id,
            "workspace.connect",
            &target,
            "success",
            Some(details.clone()),
        )
        .await;
        let end = ConnectionEnd {
            control: self.clone(),
            caller: caller.clone(),
            workspace_id: workspace.id.clone(),
            target,
            details,
            started: Instant::now(),
            activity: self.spawn_activity(workspace.id.clone()),
            audited: false,
        };
        Ok((stream, end))
    }

    /// The checks of a connection: the request's shape, the authorization,
    /// and the agent's tunnel.
    async fn prepare_connection(
        &self,
        caller: &Caller,
        reference: &str,
        request: &ConnectRequest,
    ) -> Result<(Workspace, Mux, Option<u16>), ControlError> {
        let port = match (request.kind, request.port) {
            (StreamKind::PortForward, Some(0)) | (StreamKind::PortForward, None) => {
                return Err(ControlError::BadRequest(
                    "a port-forward connection needs a port between 1 and 65535".into(),
                ))
            }
            (StreamKind::PortForward, port) => port,
            (StreamKind::Ssh, Some(_)) => {
                return Err(ControlError::BadRequest(
                    "an ssh connection takes no port (forward ports through SSH or with kind=port-forward)".into(),
                ))
            }
            (StreamKind::Ssh, None) => None,
        };
        let workspace = self
            .resolve_workspace(caller, reference, Action::WorkspaceConnect)
            .await?;
        // An agent that outlived its workspace's stop (a template whose
        // machine is not destroyed) is not a way in.
        let started = self
            .inner
            .store
            .latest_succeeded_build(&workspace.id)
            .await?
            .is_some_and(|build| build.transition == Transition::Start);
        if !started {
            return Err(ControlError::Conflict(
                "the workspace is not running: start it first".into(),
            ));
        }
        let mux = self.live_agent(&workspace, request.agent.as_deref())?;
        Ok((workspace, mux, port))
    }

    /// The tunnel of the workspace's agent (the one named, or the first by
    /// name) if it is up.
    fn live_agent(&self, workspace: &Workspace, name: Option<&str>) -> Result<Mux, ControlError> {
        let agents = self.inner.tunnels.agents();
        let mut candidates: Vec<&LiveAgent> = agents
            .values()
            .filter(|live| live.workspace_id == workspace.id && live.mux.is_open())
            .filter(|live| name.is_none_or(|name| live.name == name))
            .collect();
        candidates.sort_by(|a, b| a.name.cmp(&b.name));
        candidates
            .first()
            .map(|live| live.mux.clone())
            .ok_or_else(|| match name {
                Some(name) => ControlError::Conflict(format!(
                    "agent \"{name}\" of this workspace is not connected (is the workspace started, and is that its agent's name?)"
                )),
                None => agent_not_connected(),
            })
    }

    /// The workspace's SSH host key seed (hex), created on first use.
    async fn host_key(&self, workspace_id: &str) -> Result<String, ControlError> {
        let mut seed = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut seed);
        Ok(self
            .inner
            .store
            .workspace_host_key(workspace_id, &hex::encode(seed))
            .await?)
    }

    /// Reports use of the workspace now and every activity interval while
    /// the connection lasts (the task is aborted at its end).
    fn spawn_activity(&self, workspace_id: String) -> JoinHandle<()> {
        let control = self.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(ACTIVITY_THROTTLE);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                if let Err(error) = control.record_activity(&workspace_id).await {
                    tracing::warn!(%error, workspace = %workspace_id, "cannot record workspace activity");
                }
            }
        })
    }
}

fn agent_not_connected() -> ControlError {
    ControlError::Conflict(
        "the workspace's agent is not connected: start the workspace, or wait until its agent is up"
            .into(),
    )
}
