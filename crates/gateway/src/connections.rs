//! A person's connections into a workspace (issue 14): `abode ssh`, `abode
//! port-forward` and the web terminal, each a stream through the
//! workspace's agent's tunnel.
//!
//! A connection is authorized like every other action on the workspace
//! (`workspace.connect`: its owner, and the roles the policy grants,
//! recorded as such in the audit log), a stream is opened to the
//! workspace's agent, and the connection and its end are audited with the
//! user, the workspace and the kind. While it is open, the workspace counts
//! as used (its last use and autostop deadline move, once per activity
//! interval, never per byte). A connection reaching a server without the
//! agent's tunnel is relayed to the one with it, which authorizes and
//! audits it as its own.

use std::time::Instant;

use abode_control::authz::Action;
use abode_control::{Caller, ControlError, Workspaces};
use abode_identity::audit::{audit_event, Audit};
use abode_store::{NewAuditEvent, Store, Workspace};
use abode_tunnel::{MessageReceiver, MessageSender, StreamKind, StreamRequest, TerminalOpen};
use rand::RngCore;
use tokio::task::JoinHandle;

use crate::connection_log::{ByteCounts, ConnectionClient, ConnectionLog, EndReason, LogEntry};
use crate::tunnels::{Opened, Tunnels};

/// A stream to a workspace's agent, as messages (the server relays it to a
/// person's WebSocket): what to send, what arrives.
pub type AgentStream = (MessageSender, MessageReceiver);

/// What a person asks to connect to: `ssh`, `port-forward` or `pty` in the
/// workspace they name.
#[derive(Debug, Clone)]
pub struct ConnectRequest {
    /// The workspace, as the person named it (`name` or `owner/name`).
    pub workspace: String,
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
    /// Where the request came from (the connection log's).
    pub client: ConnectionClient,
}

/// An open connection: the stream to the agent, and its bookkeeping.
pub struct Connection {
    pub stream: AgentStream,
    pub end: ConnectionEnd,
}

/// The bookkeeping of an open connection into a workspace. Its end is
/// audited and logged when it is dropped (the connection ended, or its
/// upgrade never happened), or awaited with [`ConnectionEnd::ended`].
pub struct ConnectionEnd {
    log: Option<LogEntry>,
    /// The agent's tunnel: closed at the end, the agent went away.
    mux: abode_tunnel::Mux,
    audit: Audit,
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
    /// long it lasted), logs it ended `why` (the agent's tunnel closed:
    /// [`EndReason::AgentGone`]) and stops reporting activity.
    pub async fn ended(mut self, why: EndReason) {
        self.audited = true;
        self.activity.abort();
        let why = if self.mux.is_open() {
            why
        } else {
            EndReason::AgentGone
        };
        let logged = self.log.take().map(|log| log.close(why));
        self.disconnect_audit().await;
        if let Some(logged) = logged {
            logged.await;
        }
    }

    /// The bytes each way, counted as they pass.
    pub fn bytes(&self) -> Option<std::sync::Arc<ByteCounts>> {
        self.log.as_ref().map(|log| log.bytes.clone())
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
        let audit = self.audit.clone();
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
            if let Some(log) = self.log.take() {
                runtime.spawn(log.close(EndReason::Interrupted));
            }
        }
    }
}

/// What a person did to a workspace, referring to it by id (its history
/// follows it through renames and transfers).
pub(crate) fn workspace_event(
    caller: &Caller,
    workspace_id: &str,
    action: &str,
    target: &str,
    outcome: &str,
    details: Option<String>,
) -> NewAuditEvent {
    let mut event = audit_event(
        Some(&caller.user),
        caller.request_id.clone(),
        action,
        "workspace",
        target,
        outcome,
        details,
    );
    event.workspace_id = Some(workspace_id.to_string());
    event
}

/// People's connections into workspaces; cheap to clone.
#[derive(Clone)]
pub struct Connections {
    store: Store,
    tunnels: Tunnels,
    workspaces: Workspaces,
    audit: Audit,
    log: ConnectionLog,
}

/// A connection's checks passed, on this server: the workspace, its
/// agent's tunnel, the port, and the command of the app a terminal opens.
struct Prepared {
    workspace: Workspace,
    mux: abode_tunnel::Mux,
    port: Option<u16>,
    app_command: Option<String>,
}

impl Connections {
    pub(crate) fn new(
        store: Store,
        tunnels: Tunnels,
        workspaces: Workspaces,
        log: ConnectionLog,
    ) -> Connections {
        Connections {
            log,
            audit: Audit::new(store.clone()),
            store,
            tunnels,
            workspaces,
        }
    }

    /// What `Gateway::open` would refuse this connection for, without
    /// connecting (a request that is not a WebSocket is answered with it).
    pub async fn check(
        &self,
        caller: &Caller,
        request: &ConnectRequest,
    ) -> Result<(), ControlError> {
        self.prepare(caller, request, true).await.map(|_| ())
    }

    /// Opens a connection into a workspace for `caller` (`GET
    /// /workspaces/{ws}/connect`): authorized as `workspace.connect`, audited
    /// when the agent's tunnel is on this server; when it is on another
    /// (and `may_relay`: the request was not relayed already), where to
    /// relay it. Refused while no server has the agent's tunnel.
    pub(crate) async fn open(
        &self,
        caller: &Caller,
        request: &ConnectRequest,
        may_relay: bool,
    ) -> Result<Opened<Connection>, ControlError> {
        let Prepared {
            workspace,
            mux,
            port,
            app_command,
        } = match self.prepare(caller, request, may_relay).await? {
            Opened::Local(prepared) => prepared,
            Opened::OnServer(url) => return Ok(Opened::OnServer(url)),
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
        // Logged beside the stream's opening (the row is written on a task).
        let log = self.log.opened(abode_store::NewConnectionLogEntry {
            server_id: String::new(),
            user_id: caller.user.id.clone(),
            user_name: caller.user.username.clone(),
            token_name: caller.token_name.clone(),
            workspace_id: workspace.id.clone(),
            workspace_name: format!("{}/{}", workspace.owner_name, workspace.name),
            kind: request.kind.as_str().to_string(),
            app: request.app.clone(),
            port: port.map(i64::from),
            client_ip: request.client.ip.clone(),
            user_agent: request.client.user_agent.clone(),
        });
        let stream = mux
            .open_messages(header)
            .await
            .map_err(|_| agent_not_connected());
        let stream = match stream {
            Ok(stream) => stream,
            Err(refused) => {
                log.close(EndReason::AgentGone).await;
                return Err(refused);
            }
        };
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
        self.audit
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
            log: Some(log),
            mux,
            audit: self.audit.clone(),
            caller: caller.clone(),
            workspace_id: workspace.id.clone(),
            target,
            details,
            started: Instant::now(),
            activity: self.spawn_activity(workspace.id.clone()),
            audited: false,
        };
        Ok(Opened::Local(Connection { stream, end }))
    }

    /// The checks of a connection: the request's shape, the authorization,
    /// and the agent's tunnel.
    async fn prepare(
        &self,
        caller: &Caller,
        request: &ConnectRequest,
        may_relay: bool,
    ) -> Result<Opened<Prepared>, ControlError> {
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
            .workspaces
            .resolve(caller, &request.workspace, Action::WorkspaceConnect)
            .await?;
        // An agent that outlived its workspace's stop (a template whose
        // machine is not destroyed) is not a way in.
        if !self.tunnels.started(&workspace.id).await? {
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
        match self.tunnels.locate(&workspace, name, may_relay).await? {
            Some(Opened::Local(mux)) => Ok(Opened::Local(Prepared {
                app_command: app.map(|(_, command)| command),
                workspace,
                mux,
                port,
            })),
            Some(Opened::OnServer(url)) => Ok(Opened::OnServer(url)),
            None => {
                // An agent whose start scripts block login opens its tunnel
                // once they ended: say so, and `abode ssh` waits.
                let starting = self
                    .store
                    .agents_of_workspace(&workspace.id)
                    .await?
                    .into_iter()
                    .filter(|agent| name.is_none_or(|name| agent.name == name))
                    .any(|agent| agent.lifecycle == Some(abode_store::AgentLifecycle::Starting));
                Err(match name {
                    _ if starting => ControlError::Conflict(
                        "the workspace's agent is starting: login waits for its start scripts (start_blocks_login) to end"
                            .into(),
                    ),
                    Some(name) => ControlError::Conflict(format!(
                        "agent \"{name}\" of this workspace is not connected (is the workspace started, and is that its agent's name?)"
                    )),
                    None => agent_not_connected(),
                })
            }
        }
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
        let apps = self.store.apps_of_workspace(&workspace.id).await?;
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

    /// The log of this server's connections.
    pub fn log(&self) -> &ConnectionLog {
        &self.log
    }

    /// The workspace's SSH host key seed (hex), created on first use.
    async fn host_key(&self, workspace_id: &str) -> Result<String, ControlError> {
        let mut seed = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut seed);
        Ok(self
            .store
            .workspace_host_key(workspace_id, &hex::encode(seed))
            .await?)
    }

    /// Reports use of the workspace now and every activity interval while
    /// the connection lasts (the task is aborted at its end).
    fn spawn_activity(&self, workspace_id: String) -> JoinHandle<()> {
        let workspaces = self.workspaces.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(abode_control::ACTIVITY_THROTTLE);
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

fn agent_not_connected() -> ControlError {
    ControlError::Conflict(
        "the workspace's agent is not connected: start the workspace, or wait until its agent is up"
            .into(),
    )
}
