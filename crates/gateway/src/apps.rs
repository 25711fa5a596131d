//! Apps served from workspaces through the server (issue 33, docs/apps.md):
//! whether a caller may open the app a request names (the share level,
//! asked of `authz::authorize_app`), a stream to it through its agent
//! (a connection the agent dials back, or a stream of its tunnel), shared
//! ports, and an app host's sign-in. Speaking HTTP over the stream is
//! `proxy.rs`'s.
//!
//! A subdomain app never sees the dashboard's cookie (another host), so a
//! person signs in to it through a one-time code minted on the dashboard's
//! origin for that host alone, exchanged there for a session cookie of
//! that host (`app_tokens` in the store, only hashes kept).

use std::sync::Arc;
use std::time::Duration;

use abode_contract::apps::{app_target, AppDefinition, AppHealth, AppShare, AppTarget};
use abode_control::authz::{self, Action, AppAccess};
use abode_control::{Caller, Clock, Control, ControlError};
use abode_credentials::secrets;
use abode_identity::audit::{audit_event, Audit};
use abode_metrics::Metrics;
use abode_sdk::percent_encode as encode;
use abode_store::{
    AppTokenKind, NewConnectionLogEntry, PortShare, Store, StoreError, Workspace, WorkspaceApp,
};
use abode_tunnel::{BoxedStream, MessageIo, StreamKind, StreamRequest};
use rand::RngCore;

use crate::app_hosts::{agent_url_name, AppAddress, AppHost, AppsConfig};
use crate::connection_log::{ConnectionClient, ConnectionLog};
use crate::connections::workspace_event;
use crate::dial_backs::DialBacks;
use crate::tunnels::{Opened, Tunnels};

/// How long a code minted on the dashboard's origin may be exchanged.
const CODE_LIFETIME: Duration = Duration::from_secs(60);
/// How long an app host's session lasts (then the person is sent through
/// the dashboard again, which is quick while they are signed in there).
pub const APP_SESSION_LIFETIME: Duration = Duration::from_secs(60 * 60);

/// Why an app is not served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppRefusal {
    /// Not signed in, and the app is not public.
    SignIn,
    /// No such app, or one the caller may not see (told apart from
    /// nothing).
    NotFound,
    /// The app exists and the caller may open it, but it cannot be reached
    /// now (the workspace is stopped, its agent not connected).
    Unavailable(String),
}

impl From<StoreError> for AppRefusal {
    fn from(error: StoreError) -> AppRefusal {
        match error {
            StoreError::NotFound(_) => AppRefusal::NotFound,
            other => AppRefusal::Unavailable(format!("the database: {other}")),
        }
    }
}

/// How long a request waits for its agent to reach the app's port and
/// dial back (or say it will not).
const DIAL_BACK_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// How a dial-back wait ended.
enum DialBackOutcome {
    /// The agent's connection arrived.
    Dialed(BoxedStream),
    /// The stream stays on the tunnel: what came first on it (`None`: it
    /// ended).
    OnTunnel(Option<Vec<u8>>),
    Silent,
}

/// An app found and allowed, with a stream to it: a connection the agent
/// dialed back, or the tunnel's stream.
pub struct AppStream {
    pub stream: BoxedStream,
    pub target: AppTarget,
    pub app: WorkspaceApp,
    /// The connection log's entry, should the request become an app
    /// session (a WebSocket: `proxy.rs`).
    pub session: AppSession,
}

/// An app request's entry in the connection log, written only if it
/// upgrades: an app session is a WebSocket through the app (one entry per
/// socket, with its bytes and end), never a plain HTTP request.
pub struct AppSession {
    pub(crate) log: ConnectionLog,
    pub(crate) entry: NewConnectionLogEntry,
}

impl AppSession {
    /// Where the request came from.
    pub fn from_client(&mut self, client: ConnectionClient) {
        self.entry.client_ip = client.ip;
        self.entry.user_agent = client.user_agent;
    }
}

/// An app as people see it: its definition, health and addresses.
#[derive(Debug, Clone)]
pub struct AppView {
    pub app: WorkspaceApp,
    /// Under the dashboard's address (with `--allow-path-apps`).
    pub path_url: Option<String>,
    /// On a host of its own (with `--wildcard-access-url`).
    pub subdomain_url: Option<String>,
}

impl AppView {
    /// The address the dashboard links: the one the template asked for,
    /// else the other one the server offers.
    pub fn url(&self) -> Option<&str> {
        let (first, second) = if self.app.definition.subdomain {
            (&self.subdomain_url, &self.path_url)
        } else {
            (&self.path_url, &self.subdomain_url)
        };
        first.as_deref().or(second.as_deref())
    }
}

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// Apps and shared ports as people open them: whether a caller may open
/// the app a request names, a stream to it through its agent, and an app
/// host's sign-in; cheap to clone.
#[derive(Clone)]
pub struct Apps {
    inner: Arc<AppsParts>,
}

/// What the apps service is made of (composed by `Gateway::new`).
struct AppsParts {
    store: Store,
    clock: Clock,
    config: AppsSettings,
    /// Identity, templates and workspaces, through their services.
    control: Control,
    tunnels: Tunnels,
    dial_backs: DialBacks,
    audit: Audit,
}

/// The server's settings the apps service reads.
pub(crate) struct AppsSettings {
    /// The dashboard's address, where app hosts send people to sign in.
    pub(crate) access_url: String,
    pub(crate) apps: AppsConfig,
    pub(crate) metrics: Metrics,
    pub(crate) log: ConnectionLog,
}

impl Apps {
    pub(crate) fn new(
        store: Store,
        control: Control,
        config: AppsSettings,
        tunnels: Tunnels,
        dial_backs: DialBacks,
    ) -> Apps {
        Apps {
            inner: Arc::new(AppsParts {
                audit: Audit::new(store.clone()),
                clock: control.config().clock.clone(),
                store,
                config,
                control,
                tunnels,
                dial_backs,
            }),
        }
    }

    /// The dashboard's address (`https://`: an app host's cookie is
    /// `Secure`).
    pub(crate) fn access_url(&self) -> &str {
        &self.inner.config.access_url
    }

    /// Where apps are served.
    pub fn config(&self) -> &AppsConfig {
        &self.inner.config.apps
    }

    fn now_ms(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    async fn audit_template(&self, caller: &Caller, template: &str, details: String) {
        let event = audit_event(
            Some(&caller.user),
            caller.request_id.clone(),
            "template.port_share",
            "template",
            template,
            "success",
            Some(details),
        );
        self.inner.audit.record(&event).await;
    }

    /// The access URL's scheme, `http` or `https`.
    fn access_scheme(&self) -> &'static str {
        if self
            .inner
            .config
            .access_url
            .to_ascii_lowercase()
            .starts_with("https://")
        {
            "https"
        } else {
            "http"
        }
    }

    /// The app host a subdomain request's `Host` names, when the server
    /// serves subdomain apps.
    pub fn app_host_of(&self, host: &str) -> Option<AppHost> {
        self.inner.config.apps.wildcard.as_ref()?.app_host_of(host)
    }

    /// A workspace's apps with their addresses, for those who may read it.
    pub async fn workspace_app_views(
        &self,
        workspace: &Workspace,
    ) -> Result<Vec<AppView>, ControlError> {
        let apps = self.inner.store.apps_of_workspace(&workspace.id).await?;
        let config = &self.inner.config;
        let base = config.access_url.trim_end_matches('/');
        Ok(apps
            .into_iter()
            .map(|app| {
                let address = AppAddress {
                    owner: workspace.owner_name.clone(),
                    workspace: workspace.name.clone(),
                    agent: Some(agent_url_name(&app.agent_name)),
                    slug: app.definition.slug.clone(),
                };
                let served = app.definition.url.is_some();
                let path_url = (served && config.apps.allow_path_apps)
                    .then(|| format!("{base}{}", address.path()));
                let subdomain_url = config
                    .apps
                    .wildcard
                    .as_ref()
                    .filter(|_| served)
                    .and_then(|wildcard| wildcard.host_of(&address))
                    .map(|host| format!("{}://{host}/", self.access_scheme()));
                AppView {
                    app,
                    path_url,
                    subdomain_url,
                }
            })
            .collect())
    }

    /// The app `address` names and whether `caller` may open it; then a
    /// stream to it through its agent's tunnel on this server, or (when
    /// `may_relay`: the request was not relayed already) the server that
    /// holds that tunnel.
    pub(crate) async fn open_app(
        &self,
        caller: Option<&Caller>,
        address: &AppAddress,
        may_relay: bool,
    ) -> Result<Opened<AppStream>, AppRefusal> {
        let (workspace, app) = self.allowed_app(caller, address).await?;
        let Some(url) = &app.definition.url else {
            return Err(AppRefusal::NotFound);
        };
        let target = app_target(url).map_err(|_| AppRefusal::NotFound)?;
        let session = AppSession {
            log: self.inner.config.log.clone(),
            entry: NewConnectionLogEntry {
                server_id: String::new(),
                user_id: caller
                    .map(|caller| caller.user.id.clone())
                    .unwrap_or_default(),
                user_name: caller.map_or_else(
                    || "(anonymous)".to_string(),
                    |caller| caller.user.username.clone(),
                ),
                token_name: caller.and_then(|caller| caller.token_name.clone()),
                workspace_id: workspace.id.clone(),
                workspace_name: format!("{}/{}", workspace.owner_name, workspace.name),
                kind: "app".into(),
                app: Some(app.definition.slug.clone()),
                port: Some(i64::from(target.port)),
                client_ip: None,
                user_agent: None,
            },
        };
        if !self.inner.tunnels.started(&workspace.id).await? {
            return Err(AppRefusal::Unavailable(
                "the workspace is not running: start it first".into(),
            ));
        }
        let located = self
            .inner
            .tunnels
            .locate(&workspace, Some(&app.agent_name), may_relay)
            .await
            .map_err(|error| AppRefusal::Unavailable(error.to_string()))?;
        let mux = match located {
            Some(Opened::Local(mux)) => mux,
            Some(Opened::OnServer(url)) => return Ok(Opened::OnServer(url)),
            None => {
                return Err(AppRefusal::Unavailable(format!(
                    "the agent {} serving this app is not connected",
                    app.agent_name
                )))
            }
        };
        // An agent that dials back carries the app's bytes on a connection
        // of its own, with no tunnel framing between (what a download's
        // throughput depends on).
        let asks = mux.peer_dials_back() && !self.inner.config.apps.no_dial_back;
        let mut dial_back =
            asks.then(|| self.inner.dial_backs.expect(&workspace.id, &app.agent_name));
        let header = StreamRequest {
            kind: StreamKind::PortForward,
            port: Some(target.port),
            host: Some(target.host.clone()),
            host_key: None,
            terminal: None,
            dial_back: dial_back.as_ref().map(|wait| wait.ticket().to_string()),
            user: caller.map_or_else(
                || "(anonymous)".to_string(),
                |caller| caller.user.username.clone(),
            ),
        };
        let header = serde_json::to_vec(&header)
            .map_err(|error| AppRefusal::Unavailable(format!("stream header: {error}")))?;
        let (sender, mut receiver) = mux
            .open_messages(header)
            .await
            .map_err(|_| AppRefusal::Unavailable("the agent's tunnel closed; try again".into()))?;
        let Some(wait) = dial_back.as_mut() else {
            // As messages read as bytes: no pipe and no task between the
            // tunnel and the HTTP client.
            let stream: BoxedStream = Box::new(MessageIo::new(sender, receiver));
            self.inner
                .config
                .metrics
                .app_stream(abode_metrics::APP_STREAM_TUNNEL);
            return Ok(Opened::Local(AppStream {
                stream,
                target,
                app,
                session,
            }));
        };
        let deadline = tokio::time::Instant::now() + DIAL_BACK_WAIT;
        // A dial-back that broke on the way (its upgrade failed) leaves the
        // agent to carry the stream on the tunnel: its marker still counts.
        let mut dial_broke = false;
        let outcome = loop {
            tokio::select! {
                dialed = wait.arrived(), if !dial_broke => match dialed {
                    Some(dialed) => break DialBackOutcome::Dialed(dialed),
                    None => dial_broke = true,
                },
                first = receiver.recv() => break DialBackOutcome::OnTunnel(first),
                () = tokio::time::sleep_until(deadline) => break DialBackOutcome::Silent,
            }
        };
        let metrics = &self.inner.config.metrics;
        let stream: BoxedStream = match outcome {
            // The tunnel's stream is dropped: the agent hears it is done.
            DialBackOutcome::Dialed(dialed) => {
                metrics.app_stream(abode_metrics::APP_STREAM_DIALED_BACK);
                dialed
            }
            // The agent's marker (an empty frame), or the stream's end when
            // it could not reach the port: the HTTP client sees that.
            DialBackOutcome::OnTunnel(first) => {
                if first.is_some() {
                    metrics.app_stream(abode_metrics::APP_STREAM_TUNNEL);
                }
                Box::new(MessageIo::new(sender, receiver).starting_with(first.unwrap_or_default()))
            }
            DialBackOutcome::Silent => {
                return Err(AppRefusal::Unavailable(format!(
                    "the agent {} did not answer within {} s; try again",
                    app.agent_name,
                    DIAL_BACK_WAIT.as_secs()
                )))
            }
        };
        Ok(Opened::Local(AppStream {
            stream,
            target,
            app,
            session,
        }))
    }

    /// The workspace and app `address` names, if `caller` may open it.
    async fn allowed_app(
        &self,
        caller: Option<&Caller>,
        address: &AppAddress,
    ) -> Result<(Workspace, WorkspaceApp), AppRefusal> {
        let owner = self.inner.store.user_by_name(&address.owner).await?;
        let workspace = self
            .inner
            .store
            .workspace_by_owner_and_name(&owner.id, &address.workspace)
            .await?;
        if workspace.deleted {
            return Err(AppRefusal::NotFound);
        }
        let apps = self.inner.store.apps_of_workspace(&workspace.id).await?;
        let mut named = apps.into_iter().filter(|app| {
            app.definition.slug == address.slug
                && address
                    .agent
                    .as_deref()
                    .is_none_or(|agent| agent_url_name(&app.agent_name) == agent)
        });
        let app = match (named.next(), named.next()) {
            (Some(app), None) => app,
            (None, _) => match address.slug.parse::<u16>() {
                // Not an app: a port, shared or the owner's own.
                Ok(port) if port > 0 => self.port_app(&workspace, address, port).await?,
                _ => return Err(AppRefusal::NotFound),
            },
            (Some(_), Some(_)) => return Err(AppRefusal::NotFound),
        };
        let subject = caller.map(Caller::subject);
        // A share of the workspace opens its `owner` apps (issue 49).
        let shared = match caller {
            Some(caller) if caller.user.id != workspace.owner_id => {
                self.inner
                    .store
                    .share_role_of(&workspace.id, &caller.user.id)
                    .await?
            }
            _ => None,
        };
        match authz::authorize_app(
            subject.as_ref(),
            app.definition.share,
            &workspace.owner_id,
            shared,
        ) {
            AppAccess::Allowed => Ok((workspace, app)),
            AppAccess::SignInFirst => Err(AppRefusal::SignIn),
            AppAccess::Hidden => Err(AppRefusal::NotFound),
        }
    }

    /// A port of a workspace's agent as an app: shared at the level `abode
    /// port-share` gave it (never past the template's maximum now), else
    /// the owner's alone.
    async fn port_app(
        &self,
        workspace: &Workspace,
        address: &AppAddress,
        port: u16,
    ) -> Result<WorkspaceApp, AppRefusal> {
        let agents = self.inner.store.agents_of_workspace(&workspace.id).await?;
        let mut named = agents.iter().filter(|agent| {
            address
                .agent
                .as_deref()
                .is_none_or(|wanted| agent_url_name(&agent.name) == wanted)
        });
        let (Some(agent), None) = (named.next(), named.next()) else {
            return Err(AppRefusal::NotFound);
        };
        let max = self
            .inner
            .store
            .template_max_port_share(&workspace.template_id)
            .await?;
        let share = self
            .inner
            .store
            .port_shares(&workspace.id)
            .await?
            .into_iter()
            .find(|shared| shared.agent_name == agent.name && shared.port == port)
            .map_or(AppShare::Owner, |shared| shared.share.min(max));
        Ok(WorkspaceApp {
            id: format!("port-{port}"),
            workspace_id: workspace.id.clone(),
            agent_id: agent.id.clone(),
            agent_name: agent.name.clone(),
            definition: AppDefinition {
                slug: port.to_string(),
                display_name: None,
                url: Some(format!("http://localhost:{port}")),
                command: None,
                subdomain: true,
                share,
                icon: None,
                open_in: abode_contract::apps::AppOpenIn::Tab,
                healthcheck: None,
            },
            health: AppHealth::Disabled,
            health_changed_at: None,
        })
    }

    /// The agent of `workspace` named `agent` (its name or URL name), or
    /// its only agent.
    async fn agent_named(
        &self,
        workspace: &Workspace,
        agent: Option<&str>,
    ) -> Result<String, ControlError> {
        let agents = self.inner.store.agents_of_workspace(&workspace.id).await?;
        let mut named = agents.iter().filter(|candidate| {
            agent.is_none_or(|wanted| {
                candidate.name == wanted || agent_url_name(&candidate.name) == wanted
            })
        });
        match (named.next(), named.next(), agent) {
            (Some(found), None, _) => Ok(found.name.clone()),
            (None, _, Some(wanted)) => Err(ControlError::NotFound(format!(
                "the workspace has no agent \"{wanted}\" (is it started?)"
            ))),
            (None, _, None) => Err(ControlError::Conflict(
                "the workspace has no agent: start it first".into(),
            )),
            (Some(_), Some(_), _) => Err(ControlError::BadRequest(
                "the workspace has several agents: say which with --agent".into(),
            )),
        }
    }

    /// `abode port-share WS PORT --share LEVEL`: opens a port of the
    /// caller's workspace to `share` (authenticated or public), within the
    /// template's maximum.
    pub async fn share_port(
        &self,
        caller: &Caller,
        reference: &str,
        port: u16,
        share: AppShare,
        agent: Option<&str>,
    ) -> Result<PortShare, ControlError> {
        let workspace = self
            .inner
            .control
            .workspaces()
            .resolve(caller, reference, Action::WorkspaceConnect)
            .await?;
        if port == 0 {
            return Err(ControlError::BadRequest(
                "a port is between 1 and 65535".into(),
            ));
        }
        if share == AppShare::Owner {
            return Err(ControlError::BadRequest(
                "a port is its owner's already: share it with authenticated or public, or remove its share".into(),
            ));
        }
        let max = self
            .inner
            .store
            .template_max_port_share(&workspace.template_id)
            .await?;
        if share > max {
            return Err(ControlError::Forbidden(format!(
                "template {} lets its workspaces share ports up to `{}`, not `{}` (abode templates port-share {} --max LEVEL)",
                workspace.template_name,
                max.as_str(),
                share.as_str(),
                workspace.template_name
            )));
        }
        let agent_name = self.agent_named(&workspace, agent).await?;
        self.inner
            .store
            .put_port_share(&workspace.id, &agent_name, port, share, &caller.user.id)
            .await?;
        self.inner
            .audit
            .record(&workspace_event(
                caller,
                &workspace.id,
                "workspace.port_share",
                &format!("{}/{}", workspace.owner_name, workspace.name),
                "success",
                Some(format!(
                    "agent={agent_name} port={port} share={}",
                    share.as_str()
                )),
            ))
            .await;
        self.inner
            .store
            .port_shares(&workspace.id)
            .await?
            .into_iter()
            .find(|shared| shared.agent_name == agent_name && shared.port == port)
            .ok_or_else(|| ControlError::Internal("the port share just written is gone".into()))
    }

    /// `abode port-share remove WS PORT`: the port is its owner's alone again.
    pub async fn unshare_port(
        &self,
        caller: &Caller,
        reference: &str,
        port: u16,
        agent: Option<&str>,
    ) -> Result<(), ControlError> {
        let workspace = self
            .inner
            .control
            .workspaces()
            .resolve(caller, reference, Action::WorkspaceConnect)
            .await?;
        let shares = self.inner.store.port_shares(&workspace.id).await?;
        let mut named = shares.iter().filter(|shared| {
            shared.port == port
                && agent.is_none_or(|wanted| {
                    shared.agent_name == wanted || agent_url_name(&shared.agent_name) == wanted
                })
        });
        let (Some(shared), None) = (named.next(), named.next()) else {
            return Err(ControlError::NotFound(format!("port {port} is not shared")));
        };
        self.inner
            .store
            .delete_port_share(&workspace.id, &shared.agent_name, port)
            .await?;
        self.inner
            .audit
            .record(&workspace_event(
                caller,
                &workspace.id,
                "workspace.port_unshare",
                &format!("{}/{}", workspace.owner_name, workspace.name),
                "success",
                Some(format!("agent={} port={port}", shared.agent_name)),
            ))
            .await;
        Ok(())
    }

    /// `abode port-share list WS`: the workspace's shared ports, each with
    /// the level it opens to now (never past the template's maximum) and
    /// its address.
    pub async fn port_shares(
        &self,
        caller: &Caller,
        reference: &str,
    ) -> Result<Vec<(PortShare, Option<String>)>, ControlError> {
        let workspace = self
            .inner
            .control
            .workspaces()
            .resolve(caller, reference, Action::WorkspaceRead)
            .await?;
        let max = self
            .inner
            .store
            .template_max_port_share(&workspace.template_id)
            .await?;
        let config = &self.inner.config;
        let base = config.access_url.trim_end_matches('/');
        Ok(self
            .inner
            .store
            .port_shares(&workspace.id)
            .await?
            .into_iter()
            .map(|mut shared| {
                shared.share = shared.share.min(max);
                let address = AppAddress {
                    owner: workspace.owner_name.clone(),
                    workspace: workspace.name.clone(),
                    agent: Some(agent_url_name(&shared.agent_name)),
                    slug: shared.port.to_string(),
                };
                let url = match &config.apps.wildcard {
                    Some(wildcard) => wildcard
                        .host_of(&address)
                        .map(|host| format!("{}://{host}/", self.access_scheme())),
                    None => config
                        .apps
                        .allow_path_apps
                        .then(|| format!("{base}{}", address.path())),
                };
                (shared, url)
            })
            .collect())
    }

    /// How far a template's workspaces may share ports (template admins
    /// set it, `abode templates port-share NAME --max LEVEL`).
    pub async fn template_max_port_share(
        &self,
        caller: &Caller,
        template: &str,
        max: Option<AppShare>,
    ) -> Result<AppShare, ControlError> {
        let action = if max.is_some() {
            Action::TemplatePolicyEdit
        } else {
            Action::TemplateRead
        };
        let found = self
            .inner
            .control
            .templates()
            .template_for(caller, template, action)
            .await?;
        if let Some(max) = max {
            self.inner
                .store
                .set_template_max_port_share(&found.id, max)
                .await?;
            self.audit_template(caller, template, format!("max={}", max.as_str()))
                .await;
        }
        Ok(self.inner.store.template_max_port_share(&found.id).await?)
    }

    /// Where the dashboard sends `caller` to sign in on the app host
    /// `host` (as `/apps/auth` was given it): that host, as the wildcard
    /// writes it, with a one-time code minted for it alone, returning to
    /// `path` there. Only for an app they may open; a host that is not
    /// exactly an app host is `NotFound`, so a code never leaves for
    /// another site.
    pub async fn app_sign_in_redirect(
        &self,
        caller: &Caller,
        host: &str,
        path: &str,
    ) -> Result<String, AppRefusal> {
        let app_host = self.app_host_of(host).ok_or(AppRefusal::NotFound)?;
        self.allowed_app(Some(caller), &app_host.address).await?;
        let code = random_token();
        let expires_at = self.now_ms() + CODE_LIFETIME.as_millis() as i64;
        self.inner
            .store
            .create_app_token(
                &secrets::token_hash(&code),
                AppTokenKind::Code,
                &caller.user.id,
                app_host.as_str(),
                expires_at,
            )
            .await?;
        Ok(format!(
            "{}://{}{}?code={code}&path={}",
            self.access_scheme(),
            app_host.as_str(),
            APP_AUTH_PATH,
            encode(path)
        ))
    }

    /// Exchanges a code for a session of the app host `host` (once); the
    /// session token, for the host's cookie.
    pub async fn exchange_app_code(&self, code: &str, host: &AppHost) -> Option<String> {
        let user_id = self
            .inner
            .store
            .app_token_user(
                &secrets::token_hash(code),
                AppTokenKind::Code,
                host.as_str(),
            )
            .await
            .ok()??;
        let session = random_token();
        let expires_at = self.now_ms() + APP_SESSION_LIFETIME.as_millis() as i64;
        self.inner
            .store
            .create_app_token(
                &secrets::token_hash(&session),
                AppTokenKind::Session,
                &user_id,
                host.as_str(),
                expires_at,
            )
            .await
            .ok()?;
        Some(session)
    }

    /// The person an app host's session cookie names, while the session
    /// lasts and their account may sign in.
    pub async fn app_session_caller(&self, session: &str, host: &AppHost) -> Option<Caller> {
        let user_id = self
            .inner
            .store
            .app_token_user(
                &secrets::token_hash(session),
                AppTokenKind::Session,
                host.as_str(),
            )
            .await
            .ok()??;
        self.inner
            .control
            .identity()
            .caller_of_user(&user_id, None)
            .await
            .ok()
    }

    /// The dashboard's sign-in URL for the app host `host`, returning to
    /// `path` there.
    pub fn app_sign_in_url(&self, host: &AppHost, path: &str) -> String {
        let base = self.inner.config.access_url.trim_end_matches('/');
        format!(
            "{base}/apps/auth?host={}&path={}",
            encode(host.as_str()),
            encode(path)
        )
    }
}

/// The path on an app host where a code is exchanged.
pub const APP_AUTH_PATH: &str = "/.abode/auth";
/// The cookie of an app host's session.
pub const APP_SESSION_COOKIE: &str = "abode_app_session";
