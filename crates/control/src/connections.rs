//! Connections into workspaces (issue 14): the agents' tunnels and the
//! streams people open through them.
//!
//! Each running agent keeps one connection to the server (the API glues its
//! WebSocket to an [`abode_tunnel::Mux`] and registers it here while it
//! lasts). A person's `abode ssh` or `abode port-forward` asks
//! [`Connections::connect_workspace`]: the request is authorized like every
//! other action on the workspace (`workspace.connect`: its owner, and the
//! roles the policy grants, recorded as such in the audit log), a stream is
//! opened to the workspace's agent, and the connection and its end are
//! audited with the user, the workspace and the kind. While it is open, the
//! workspace counts as used (its last use and autostop deadline move, once
//! per activity interval, never per byte).
//!
//! The registry lives in this process; with several servers, each records
//! the tunnels it holds in the database with the URL the others reach it at
//! (`Config::relay_url`), and a connection reaching a server without the
//! tunnel is relayed to the one with it (`abode-api`), which authorizes and
//! audits it as its own.
//!
//! A service of its own (`Control::connections()`): it holds the store, the
//! registry, this server's id and relay URL, and the handles of workspaces
//! (finding one, its activity) and the audit log.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use abode_store::{Agent, Store, StoreError, Transition, Workspace};
use abode_tunnel::{
    BoxedStream, MessageReceiver, MessageSender, Mux, StreamKind, StreamRequest, TerminalOpen,
};
use rand::RngCore;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::audit::{workspace_event, Audit};
use crate::authz::Action;
use crate::workspaces::ACTIVITY_THROTTLE;
use crate::{secrets, Caller, ControlError, Workspaces};

/// Connections into workspaces; cheap to clone.
#[derive(Clone)]
pub struct Connections {
    inner: Arc<ConnectionsParts>,
}

/// What [`Connections`] holds.
pub(crate) struct ConnectionsParts {
    pub(crate) store: Store,
    /// The agents' tunnels up in this process.
    pub(crate) tunnels: Tunnels,
    /// This server, for the tunnels' records.
    pub(crate) server_id: String,
    /// Where the other servers reach this one (`Config::relay_url`).
    pub(crate) relay_url: Option<String>,
    pub(crate) workspaces: Workspaces,
    pub(crate) audit: Audit,
    /// Streams waiting for their agent to dial back.
    pub(crate) dial_backs: DialBacks,
}

/// Streams waiting for their agent's connection of their own
/// ([`abode_tunnel::dial_back`]), by their one-time ticket.
#[derive(Default)]
pub(crate) struct DialBacks {
    waiting: Mutex<HashMap<String, WaitingDialBack>>,
}

/// Whose dial-back a ticket waits for, and where the connection goes.
struct WaitingDialBack {
    workspace_id: String,
    agent_name: String,
    deliver: oneshot::Sender<BoxedStream>,
}

impl DialBacks {
    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, WaitingDialBack>> {
        // Every change to the map is a single insert or remove.
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new ticket for agent `agent_name` of workspace `workspace_id`, and
    /// where its connection arrives.
    fn expect(
        &self,
        workspace_id: &str,
        agent_name: &str,
    ) -> (String, oneshot::Receiver<BoxedStream>) {
        let mut secret = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut secret);
        let ticket = hex::encode(secret);
        let (deliver, arrived) = oneshot::channel();
        self.waiting().insert(
            ticket.clone(),
            WaitingDialBack {
                workspace_id: workspace_id.to_string(),
                agent_name: agent_name.to_string(),
                deliver,
            },
        );
        (ticket, arrived)
    }

    /// Uses `ticket` up: where its connection goes, if it was issued for
    /// this agent.
    fn take(
        &self,
        workspace_id: &str,
        agent_name: &str,
        ticket: &str,
    ) -> Option<oneshot::Sender<BoxedStream>> {
        let waiting = self.waiting().remove(ticket)?;
        (waiting.workspace_id == workspace_id && waiting.agent_name == agent_name)
            .then_some(waiting.deliver)
    }
}

/// A stream's wait for its dial-back: the ticket to send its agent, and the
/// connection once the agent opened it. Dropped, the ticket is forgotten.
pub struct DialBackWait {
    ticket: String,
    arrived: oneshot::Receiver<BoxedStream>,
    connections: Connections,
}

impl DialBackWait {
    /// The ticket, for the stream's header.
    pub fn ticket(&self) -> &str {
        &self.ticket
    }

    /// The agent's connection; `None` if it broke on the way.
    pub async fn arrived(&mut self) -> Option<BoxedStream> {
        (&mut self.arrived).await.ok()
    }
}

impl Drop for DialBackWait {
    fn drop(&mut self) {
        self.connections
            .inner
            .dial_backs
            .waiting()
            .remove(&self.ticket);
    }
}

/// The agents' tunnels up in this process, by the hash of the agent's
/// token: the one thing that names an agent across builds (a start build
/// that keeps an agent, same token and process, gives it a new id).
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
    /// Tells the connection's task to close it.
    evict: oneshot::Sender<Eviction>,
}

/// Why the server closes an agent's tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// The same agent (its token) connected again: the newest connection
    /// wins (the old one is most likely dead and not noticed yet).
    Replaced,
    /// The agent is not one of its workspace's agents any more (a stop, or a
    /// start build that replaced it): nothing may reach it through the
    /// platform.
    Gone,
}

impl Eviction {
    /// The WebSocket close code the agent is told (private-use range).
    pub fn close_code(self) -> u16 {
        match self {
            Eviction::Replaced => abode_tunnel::CLOSE_REPLACED,
            Eviction::Gone => abode_tunnel::CLOSE_GONE,
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            Eviction::Replaced => "replaced by a newer connection with this agent's token",
            Eviction::Gone => "this agent is no longer one of its workspace's agents",
        }
    }
}

impl Tunnels {
    fn agents(&self) -> std::sync::MutexGuard<'_, HashMap<String, LiveAgent>> {
        self.agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a connection of the agent whose token hashes to `key`; an
    /// older connection of the same agent is told to close. Its generation
    /// and where its own eviction arrives.
    fn register(
        &self,
        key: &str,
        workspace_id: &str,
        name: &str,
        mux: Mux,
    ) -> (u64, oneshot::Receiver<Eviction>, bool) {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        let (evict, evicted) = oneshot::channel();
        let live = LiveAgent {
            workspace_id: workspace_id.to_string(),
            name: name.to_string(),
            generation,
            mux,
            evict,
        };
        let replaced = match self.agents().insert(key.to_string(), live) {
            Some(old) => {
                let _ = old.evict.send(Eviction::Replaced);
                true
            }
            None => false,
        };
        (generation, evicted, replaced)
    }

    /// Forgets connection `generation` of `key`, unless a newer one took
    /// its place.
    fn unregister(&self, key: &str, generation: u64) -> bool {
        let mut agents = self.agents();
        if agents
            .get(key)
            .is_some_and(|live| live.generation == generation)
        {
            agents.remove(key);
            return true;
        }
        false
    }

    /// Closes the tunnel of `key` (the agent is gone).
    fn evict(&self, key: &str, why: Eviction) {
        if let Some(live) = self.agents().remove(key) {
            let _ = live.evict.send(why);
        }
    }

    /// The open tunnels of a workspace's agents (named `name` if given), by
    /// agent name: their keys and handles.
    fn of_workspace(&self, workspace_id: &str, name: Option<&str>) -> Vec<(String, String, Mux)> {
        let mut found: Vec<(String, String, Mux)> = self
            .agents()
            .iter()
            .filter(|(_, live)| live.workspace_id == workspace_id && live.mux.is_open())
            .filter(|(_, live)| name.is_none_or(|name| live.name == name))
            .map(|(key, live)| (key.clone(), live.name.clone(), live.mux.clone()))
            .collect();
        found.sort_by(|a, b| a.1.cmp(&b.1));
        found
    }
}

/// Keeps an agent's tunnel registered; dropping it (the connection ended)
/// unregisters it.
pub struct AgentTunnel {
    connections: Connections,
    key: String,
    generation: u64,
    evicted: oneshot::Receiver<Eviction>,
    replaced: bool,
}

impl AgentTunnel {
    /// Whether this connection took the place of an older one of the same
    /// agent (which is being closed).
    pub fn replaced_another(&self) -> bool {
        self.replaced
    }

    /// Resolves when the server wants this connection closed, and why.
    pub async fn evicted(&mut self) -> Eviction {
        // A sender dropped without a word means the entry is gone: nothing
        // routes here any more either.
        (&mut self.evicted).await.unwrap_or(Eviction::Gone)
    }

    /// Whether the agent behind this tunnel is still one of its
    /// workspace's agents, in a started workspace (checked now and then by
    /// the connection's task, so that a tunnel outliving its agent goes
    /// away without waiting for someone to connect). A store error answers
    /// yes: a database hiccup does not cut tunnels.
    pub async fn still_current(&self, workspace_id: &str) -> bool {
        match self
            .connections
            .current_agent(&self.key, workspace_id)
            .await
        {
            Ok(current) => current.is_some(),
            Err(error) => {
                tracing::warn!(%error, "cannot check an agent's tunnel against the store");
                true
            }
        }
    }
}

impl Drop for AgentTunnel {
    fn drop(&mut self) {
        let gone = self
            .connections
            .inner
            .tunnels
            .unregister(&self.key, self.generation);
        // Another connection of the same agent to this server keeps the
        // record; one to another server has replaced it already.
        if gone {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let (connections, key) = (self.connections.clone(), self.key.clone());
                runtime.spawn(async move {
                    let server = &connections.inner.server_id;
                    if let Err(error) = connections
                        .inner
                        .store
                        .delete_agent_tunnel(&key, server)
                        .await
                    {
                        tracing::warn!(%error, "cannot remove an agent tunnel's record");
                    }
                });
            }
        }
    }
}

/// Where a person's connection goes: a stream to the agent's tunnel on this
/// server, or the server that holds the tunnel.
pub enum Connection {
    Here(AgentStream, Box<ConnectionEnd>),
    /// Relay the connection to the server at this URL (`Config::relay_url`
    /// of the server holding the tunnel), which authorizes it again.
    Elsewhere(String),
}

/// A stream to a workspace's agent, as messages (the server relays it to a
/// person's WebSocket): what to send, what arrives.
pub type AgentStream = (MessageSender, MessageReceiver);

/// What a person asks to connect to.
#[derive(Debug, Clone)]
pub struct ConnectRequest {
    pub kind: StreamKind,
    /// The port inside the workspace (`port-forward` only).
    pub port: Option<u16>,
    /// Which agent, when the workspace has several (by name).
    pub agent: Option<String>,
    /// The terminal session (`pty` only).
    pub terminal: Option<abode_tunnel::TerminalOpen>,
    /// The slug of an `abode_app` with a `command`: the terminal session
    /// runs it (`pty` only).
    pub app: Option<String>,
}

/// The bookkeeping of an open connection into a workspace. Its end is
/// audited when it is dropped (the connection ended, or its upgrade never
/// happened), or awaited with [`ConnectionEnd::ended`].
pub struct ConnectionEnd {
    connections: Connections,
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
        self.disconnect_audit().await;
    }

    /// The `workspace.disconnect` event, with how long the connection
    /// lasted, ready to record (now, or on a task when dropped).
    fn disconnect_audit(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let details = format!(
            "{} duration_ms={}",
            self.details,
            self.started.elapsed().as_millis()
        );
        let event = workspace_event(
            &self.caller,
            &self.workspace_id,
            "workspace.disconnect",
            &self.target,
            "success",
            Some(details),
        );
        let audit = self.connections.inner.audit.clone();
        async move {
            audit.record(&event).await;
        }
    }
}

impl Drop for ConnectionEnd {
    fn drop(&mut self) {
        self.activity.abort();
        if self.audited {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(self.disconnect_audit());
        }
    }
}

impl Connections {
    pub(crate) fn new(parts: ConnectionsParts) -> Connections {
        Connections {
            inner: Arc::new(parts),
        }
    }

    /// Registers an agent's tunnel (the agent authenticated with `token`);
    /// streams to its workspace go through `mux` until the returned guard
    /// is dropped. A newer connection with the same token replaces an older
    /// one, which is told to close ([`AgentTunnel::evicted`]).
    pub fn agent_tunnel_up(&self, agent: &Agent, token: &str, mux: Mux) -> AgentTunnel {
        let key = secrets::token_hash(token);
        let (generation, evicted, replaced) =
            self.inner
                .tunnels
                .register(&key, &agent.workspace_id, &agent.name, mux);
        // Told to the other servers, so that a connection reaching them is
        // relayed here.
        if let Some(relay_url) = self.inner.relay_url.clone() {
            let (connections, key) = (self.clone(), key.clone());
            let (workspace_id, name) = (agent.workspace_id.clone(), agent.name.clone());
            tokio::spawn(async move {
                let server = &connections.inner.server_id;
                if let Err(error) = connections
                    .inner
                    .store
                    .put_agent_tunnel(&key, &workspace_id, &name, server, &relay_url)
                    .await
                {
                    tracing::warn!(%error, "cannot record an agent's tunnel for the other servers");
                }
            });
        }
        AgentTunnel {
            connections: self.clone(),
            key,
            generation,
            evicted,
            replaced,
        }
    }

    /// The agent whose token hashes to `key`, if it is one of the agents of
    /// workspace `workspace_id` now and that workspace is started (what
    /// authenticating the token would say).
    pub(crate) async fn current_agent(
        &self,
        key: &str,
        workspace_id: &str,
    ) -> Result<Option<Agent>, ControlError> {
        let agent = match self.inner.store.agent_by_token_hash(key).await {
            Ok(agent) if agent.workspace_id == workspace_id => agent,
            Ok(_) | Err(StoreError::NotFound(_)) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        let started = self
            .inner
            .store
            .latest_succeeded_build(workspace_id)
            .await?
            .is_some_and(|build| build.transition == Transition::Start);
        Ok(started.then_some(agent))
    }

    /// What [`Connections::connect_workspace`] would refuse, without
    /// connecting (a request that is not a WebSocket is answered with it).
    pub async fn check_connect(
        &self,
        caller: &Caller,
        reference: &str,
        request: &ConnectRequest,
    ) -> Result<(), ControlError> {
        self.prepare_connection(caller, reference, request, true)
            .await
            .map(|_| ())
    }

    /// Opens a connection into a workspace for `caller` (`GET
    /// /workspaces/{ws}/connect`): authorized as `workspace.connect`, audited
    /// when the agent's tunnel is on this server; when it is on another
    /// (and `may_relay`: the request was not relayed already), where to
    /// relay it. Refused while no server has the agent's tunnel.
    pub async fn connect_workspace(
        &self,
        caller: &Caller,
        reference: &str,
        request: &ConnectRequest,
        may_relay: bool,
    ) -> Result<Connection, ControlError> {
        let (workspace, mux, port, app_command) = match self
            .prepare_connection(caller, reference, request, may_relay)
            .await?
        {
            Prepared::Here(workspace, mux, port, app_command) => {
                (*workspace, mux, port, app_command)
            }
            Prepared::Elsewhere(url) => return Ok(Connection::Elsewhere(url)),
        };
        let host_key = match request.kind {
            StreamKind::Ssh => Some(self.host_key(&workspace.id).await?),
            StreamKind::PortForward | StreamKind::Pty => None,
        };
        let header = StreamRequest {
            kind: request.kind,
            port,
            host: None,
            host_key,
            terminal: request.terminal.clone().map(|terminal| TerminalOpen {
                command: app_command,
                ..terminal
            }),
            dial_back: None,
            user: caller.user.username.clone(),
        };
        let header = serde_json::to_vec(&header)
            .map_err(|error| ControlError::Internal(format!("stream header: {error}")))?;
        let stream = mux
            .open_messages(header)
            .await
            .map_err(|_| agent_not_connected())?;
        let target = format!("{}/{}", workspace.owner_name, workspace.name);
        let mut details = format!("kind={}", request.kind.as_str());
        if let Some(port) = port {
            details.push_str(&format!(" port={port}"));
        }
        if let Some(terminal) = &request.terminal {
            details.push_str(&format!(" session={}", terminal.session));
        }
        if let Some(app) = &request.app {
            details.push_str(&format!(" app={app}"));
        }
        if caller.user.id != workspace.owner_id {
            // Someone other than the owner, through a role that allows it.
            details.push_str(&format!(" not_owner roles={}", caller.roles));
        }
        self.inner
            .audit
            .record(&workspace_event(
                caller,
                &workspace.id,
                "workspace.connect",
                &target,
                "success",
                Some(details.clone()),
            ))
            .await;
        let end = ConnectionEnd {
            connections: self.clone(),
            caller: caller.clone(),
            workspace_id: workspace.id.clone(),
            target,
            details,
            started: Instant::now(),
            activity: self.spawn_activity(workspace.id.clone()),
            audited: false,
        };
        Ok(Connection::Here(stream, Box::new(end)))
    }

    /// The checks of a connection: the request's shape, the authorization,
    /// and the agent's tunnel.
    async fn prepare_connection(
        &self,
        caller: &Caller,
        reference: &str,
        request: &ConnectRequest,
        may_relay: bool,
    ) -> Result<Prepared, ControlError> {
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
            (StreamKind::Pty, Some(_)) => {
                return Err(ControlError::BadRequest(
                    "a pty connection takes no port".into(),
                ))
            }
            (StreamKind::Pty, None) => None,
        };
        match (request.kind, &request.terminal) {
            (StreamKind::Pty, None) => {
                return Err(ControlError::BadRequest(
                    "a pty connection needs a session, rows and cols".into(),
                ))
            }
            (StreamKind::Pty, Some(terminal)) => {
                if !abode_tunnel::terminal::valid_session_id(&terminal.session) {
                    return Err(ControlError::BadRequest(format!(
                        "a terminal session id is 1 to {} letters, digits and dashes",
                        abode_tunnel::terminal::MAX_SESSION_ID
                    )));
                }
                if terminal.rows == 0 || terminal.cols == 0 {
                    return Err(ControlError::BadRequest(
                        "a terminal needs at least one row and one column".into(),
                    ));
                }
            }
            (_, Some(_)) => {
                return Err(ControlError::BadRequest(format!(
                    "a session, rows and cols are for pty connections, not {}",
                    request.kind.as_str()
                )))
            }
            (_, None) => {}
        }
        if request.app.is_some() && request.kind != StreamKind::Pty {
            return Err(ControlError::BadRequest(format!(
                "an app's command runs in a terminal: app is for pty connections, not {}",
                request.kind.as_str()
            )));
        }
        let workspace = self
            .inner
            .workspaces
            .resolve(caller, reference, Action::WorkspaceConnect)
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
        // An app's command runs on the app's own agent.
        let app = match &request.app {
            Some(slug) => Some(
                self.app_command(&workspace, slug, request.agent.as_deref())
                    .await?,
            ),
            None => None,
        };
        let name = match &app {
            Some((agent, _)) => Some(agent.as_str()),
            None => request.agent.as_deref(),
        };
        if let Some(mux) = self.live_agent(&workspace, name).await? {
            let command = app.map(|(_, command)| command);
            return Ok(Prepared::Here(Box::new(workspace), mux, port, command));
        }
        if may_relay {
            if let Some(url) = self.remote_agent(&workspace, name).await? {
                return Ok(Prepared::Elsewhere(url));
            }
        }
        Err(match name {
            Some(name) => ControlError::Conflict(format!(
                "agent \"{name}\" of this workspace is not connected (is the workspace started, and is that its agent's name?)"
            )),
            None => agent_not_connected(),
        })
    }

    /// The agent and command of the workspace's app `slug` (on agent `agent`
    /// when named): what its terminal runs. Not found when the workspace has
    /// no such app, or the app serves a URL rather than a command.
    async fn app_command(
        &self,
        workspace: &Workspace,
        slug: &str,
        agent: Option<&str>,
    ) -> Result<(String, String), ControlError> {
        let apps = self.inner.store.apps_of_workspace(&workspace.id).await?;
        apps.into_iter()
            .filter(|app| app.definition.slug == slug)
            .filter(|app| agent.is_none_or(|agent| app.agent_name == agent))
            .find_map(|app| Some((app.agent_name, app.definition.command?)))
            .ok_or_else(|| {
                ControlError::NotFound(format!(
                    "workspace \"{}\" has no app \"{slug}\" with a command",
                    workspace.name
                ))
            })
    }

    /// The relay URL of another server holding a tunnel of one of the
    /// workspace's current agents (named `name` if given).
    pub(crate) async fn remote_agent(
        &self,
        workspace: &Workspace,
        name: Option<&str>,
    ) -> Result<Option<String>, ControlError> {
        let server = &self.inner.server_id;
        let tunnels = self
            .inner
            .store
            .remote_agent_tunnels(&workspace.id, server)
            .await?;
        for tunnel in tunnels {
            if name.is_some_and(|name| tunnel.agent_name != name) {
                continue;
            }
            if self
                .current_agent(&tunnel.token_hash, &workspace.id)
                .await?
                .is_some()
            {
                return Ok(Some(tunnel.relay_url));
            }
        }
        Ok(None)
    }

    /// The tunnel of the workspace's agent (the one named, or the first by
    /// name) if it is up and its agent is one of the workspace's agents now.
    /// A tunnel whose agent is not (an agent process that outlived a stop,
    /// or a start build that replaced its token) is closed on the way: it is
    /// never a way in.
    pub(crate) async fn live_agent(
        &self,
        workspace: &Workspace,
        name: Option<&str>,
    ) -> Result<Option<Mux>, ControlError> {
        let tunnels = &self.inner.tunnels;
        for (key, agent_name, mux) in tunnels.of_workspace(&workspace.id, name) {
            if self.current_agent(&key, &workspace.id).await?.is_some() {
                return Ok(Some(mux));
            }
            tracing::info!(
                agent = %agent_name,
                workspace = %workspace.id,
                "closing the tunnel of an agent that is no longer the workspace's"
            );
            tunnels.evict(&key, Eviction::Gone);
        }
        Ok(None)
    }

    /// A one-time ticket for a stream to the workspace's agent `agent_name`
    /// to dial back with, and the wait for its connection.
    pub(crate) fn expect_dial_back(&self, workspace_id: &str, agent_name: &str) -> DialBackWait {
        let (ticket, arrived) = self.inner.dial_backs.expect(workspace_id, agent_name);
        DialBackWait {
            ticket,
            arrived,
            connections: self.clone(),
        }
    }

    /// Where the connection `agent` dialed back with `ticket` goes: the
    /// stream waiting for it, if it waits for this agent (the ticket is
    /// used up either way). `None` for a ticket unknown here (never issued,
    /// used, given up on, or issued by another server).
    pub fn dialed_back(&self, agent: &Agent, ticket: &str) -> Option<oneshot::Sender<BoxedStream>> {
        let deliver = self
            .inner
            .dial_backs
            .take(&agent.workspace_id, &agent.name, ticket);
        if deliver.is_none() {
            tracing::info!(
                agent = %agent.name,
                workspace = %agent.workspace_id,
                "an agent dialed back with a ticket this server does not wait for (it carries the stream on its tunnel)"
            );
        }
        deliver
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
        let workspaces = self.inner.workspaces.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(ACTIVITY_THROTTLE);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                if let Err(error) = workspaces.record_activity(&workspace_id).await {
                    tracing::warn!(%error, workspace = %workspace_id, "cannot record workspace activity");
                }
            }
        })
    }
}

/// A connection's checks passed: where its agent's tunnel is.
enum Prepared {
    /// On this server: the workspace, its agent's tunnel, the port, and the
    /// command of the app a terminal opens.
    Here(Box<Workspace>, Mux, Option<u16>, Option<String>),
    Elsewhere(String),
}

fn agent_not_connected() -> ControlError {
    ControlError::Conflict(
        "the workspace's agent is not connected: start the workspace, or wait until its agent is up"
            .into(),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use abode_tunnel::Side;
    use tokio::sync::mpsc;

    /// A tunnel handle whose other side is kept open by the returned
    /// channels.
    fn mux() -> (Mux, mpsc::Sender<Vec<u8>>, mpsc::Receiver<Vec<u8>>) {
        let (to_us, incoming) = mpsc::channel(8);
        let (outgoing, from_us) = mpsc::channel(8);
        let (mux, _accept, _task) = Mux::start(Side::Server, incoming, outgoing);
        (mux, to_us, from_us)
    }

    #[tokio::test]
    async fn a_dial_back_ticket_is_its_agent_s_and_is_used_once() {
        let dial_backs = DialBacks::default();
        let (ticket, mut arrived) = dial_backs.expect("ws", "main");
        let (other, _other_arrived) = dial_backs.expect("ws", "main");
        assert_eq!(ticket.len(), 64);
        assert_ne!(ticket, other, "each stream has its own ticket");
        assert!(dial_backs.take("ws", "main", "unknown").is_none());
        // Another workspace's agent, or another agent of the workspace, with
        // the ticket: refused, and the ticket is gone.
        assert!(dial_backs.take("other-ws", "main", &other).is_none());
        assert!(dial_backs.take("ws", "main", &other).is_none());
        let deliver = dial_backs.take("ws", "main", &ticket).unwrap();
        assert!(
            dial_backs.take("ws", "main", &ticket).is_none(),
            "used once"
        );
        let (near, _far) = tokio::io::duplex(64);
        assert!(deliver.send(Box::new(near)).is_ok());
        assert!(arrived.try_recv().is_ok());
        assert!(dial_backs.waiting().is_empty());
    }

    #[tokio::test]
    async fn the_newest_connection_of_an_agent_wins_and_the_old_one_is_told() {
        let tunnels = Tunnels::default();
        let (first_mux, _a, _b) = mux();
        let (second_mux, _c, _d) = mux();
        let (first, mut first_evicted, replaced) = tunnels.register("tok", "ws", "main", first_mux);
        assert!(!replaced);
        assert!(first_evicted.try_recv().is_err(), "nothing happened yet");
        let (second, mut second_evicted, replaced) =
            tunnels.register("tok", "ws", "main", second_mux);
        assert!(replaced);
        assert_eq!(first_evicted.try_recv().unwrap(), Eviction::Replaced);
        // The old connection's end does not unregister the new one.
        tunnels.unregister("tok", first);
        assert_eq!(tunnels.of_workspace("ws", None).len(), 1);
        assert!(second_evicted.try_recv().is_err());
        tunnels.unregister("tok", second);
        assert!(tunnels.of_workspace("ws", None).is_empty());
    }

    #[tokio::test]
    async fn a_gone_agent_is_closed_and_tunnels_are_found_by_workspace_and_name() {
        let tunnels = Tunnels::default();
        let (a, _a1, _a2) = mux();
        let (b, _b1, _b2) = mux();
        let (c, _c1, _c2) = mux();
        let (_, mut a_evicted, _) = tunnels.register("ka", "ws", "zeta", a);
        tunnels.register("kb", "ws", "alpha", b);
        tunnels.register("kc", "other", "alpha", c);
        let names = |name: Option<&str>| {
            tunnels
                .of_workspace("ws", name)
                .into_iter()
                .map(|(key, name, _)| format!("{key}:{name}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(None), ["kb:alpha", "ka:zeta"]);
        assert_eq!(names(Some("zeta")), ["ka:zeta"]);
        tunnels.evict("ka", Eviction::Gone);
        assert_eq!(a_evicted.try_recv().unwrap(), Eviction::Gone);
        assert_eq!(names(None), ["kb:alpha"]);
    }
}
