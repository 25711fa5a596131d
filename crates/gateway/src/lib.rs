//! The gateway: every way into a workspace, over `abode-tunnel` (docs/ssh.md,
//! docs/apps.md). It holds the agents' tunnels and answers one question,
//! "open this target for this caller", with a stream on this server or the
//! server that holds the target's agent ([`Gateway::open`]): a person's
//! `ssh`, `port-forward` or terminal ([`ConnectRequest`]), or an app a
//! request names ([`AppAddress`]).
//!
//! # Modules
//!
//! From the bottom up, each naming only those above it in this list:
//!
//! - `tunnels.rs`: the agents' tunnels up in this process, by their token's
//!   hash (a newer connection of an agent replaces the older, which is told
//!   to close), their records for the other servers, and where a
//!   workspace's agent is ([`Opened`]).
//! - `dial_backs.rs`: the one-time tickets of streams an agent dials back
//!   on a connection of its own.
//! - `app_hosts.rs`: how a request names an app: a host under the wildcard
//!   access URL, read whole, or a path under the dashboard's address.
//! - `connection_log.rs`: the connection log: an entry written as a
//!   connection opens on the server holding the agent's tunnel, completed
//!   at its end with its bytes (counted on the relay's path without a
//!   lock) and how it ended; the page people read.
//! - `connections.rs`: a person's connection: its checks, the
//!   authorization (`workspace.connect`), the stream's header, the audit of
//!   its start and end, and the workspace's activity while it lasts.
//! - `relay.rs`: a person's connection opened on the server that holds the
//!   agent's tunnel, with their own token, and piped there.
//! - `apps.rs`: who may open an app (its share level), its stream (dialed
//!   back, or on the tunnel), shared ports, an app host's sign-in.
//! - `proxy.rs`: an app's HTTP over its stream, or relayed to the holding
//!   server as it is; Abode's credentials never reach an app, and an app's
//!   `abode_*` cookies and `Domain` attributes never leave it.
//! - `ws_upgrade.rs`: an agent's tunnel upgraded to a WebSocket read in
//!   large pieces, and a dial-back switched to its stream's bytes.
//! - `sockets.rs`: what flows on the WebSockets: an agent's tunnel (pinged,
//!   checked against the store, closed with a code when replaced or stale)
//!   and a person's connection (ended when its token no longer opens
//!   anything, or it stays silent).
//!
//! `lib.rs` composes them ([`Gateway`]) and holds the one entry,
//! [`Gateway::open`]. The API upgrades requests and names what they ask
//! for; everything after is here.
//!
//! # What it keeps
//!
//! - Only the server opens streams to an agent, and each is a person's
//!   connection authorized as `workspace.connect` and audited with its end,
//!   or an app request its app's share level allows. An agent's tunnel is a
//!   way in only while its agent is one of its workspace's agents, in a
//!   started workspace.
//! - A workspace's host key goes only to its agent. A dial-back ticket
//!   carries at most one connection, and only from the agent it was issued
//!   for.
//! - A request relayed from another server is never relayed again, and the
//!   server holding the tunnel authorizes and audits it as its own.
//! - It decides no permission of its own: workspaces are found through
//!   `Workspaces::resolve`, templates through `Templates`, people through
//!   `Identity`, and apps are judged by `authz::authorize_app`.

mod app_hosts;
mod apps;
mod connection_log;
mod connections;
mod dial_backs;
mod live;
mod proxy;
mod relay;
mod sockets;
mod tunnels;
mod ws_upgrade;

use std::future::Future;
use std::pin::Pin;

use abode_control::{Caller, Control, ControlError};
use abode_store::Store;

pub use app_hosts::{agent_url_name, AppAddress, AppHost, AppsConfig, WildcardHost};
pub use apps::{
    AppRefusal, AppSession, AppStream, AppView, Apps, APP_AUTH_PATH, APP_SESSION_COOKIE,
    APP_SESSION_LIFETIME,
};
pub use connection_log::{
    ByteCounts, ConnectionClient, ConnectionLog, ConnectionLogQuery, EndReason,
};
pub use connections::{AgentStream, ConnectRequest, Connection, ConnectionEnd, Connections};
pub use dial_backs::DialBacks;
pub use live::{Crossing, GaugeReading, LiveMetadata, Reporter};
pub use proxy::{exchange_code, plain, redirect, relay_app, serve_app};
pub use relay::{is_relayed, Refused, Upstream, RELAYED_FOR_HEADER, RELAYED_HEADER};
pub use sockets::{AgentSocket, Reached, MAX_MESSAGE};
pub use tunnels::{AgentTunnel, Eviction, Opened, Tunnels};
pub use ws_upgrade::{BufferedUpgrade, NotAnUpgrade, Socket, READ_BUFFER};

/// Every way into a workspace; cheap to clone. The API holds it beside
/// `Control`, whose services it asks who may do what.
#[derive(Clone)]
pub struct Gateway {
    /// Who a connection's token is, while it lasts.
    control: Control,
    tunnels: Tunnels,
    dial_backs: DialBacks,
    connections: Connections,
    apps: Apps,
    live: LiveMetadata,
}

impl Gateway {
    /// The gateway of this server: its tunnels are recorded under
    /// `control`'s server id and relay URL, and apps are served as `apps`
    /// says.
    pub fn new(store: Store, control: Control, apps: AppsConfig) -> Gateway {
        let config = control.config();
        let tunnels = Tunnels::new(
            store.clone(),
            config.server_id.clone(),
            config.relay_url.clone(),
        );
        let dial_backs = DialBacks::default();
        let log = connection_log::ConnectionLog::new(
            store.clone(),
            control.workspaces().clone(),
            config.server_id.clone(),
            config.metrics.clone(),
        );
        let settings = apps::AppsSettings {
            access_url: config.access_url.clone(),
            apps,
            metrics: config.metrics.clone(),
            log: log.clone(),
        };
        let connections = Connections::new(
            store.clone(),
            tunnels.clone(),
            control.workspaces().clone(),
            log,
        );
        let apps = Apps::new(
            store,
            control.clone(),
            settings,
            tunnels.clone(),
            dial_backs.clone(),
        );
        Gateway {
            control,
            tunnels,
            dial_backs,
            connections,
            apps,
            live: LiveMetadata::default(),
        }
    }

    /// The agents' live metadata and monitor readings held by this server.
    pub fn live(&self) -> &LiveMetadata {
        &self.live
    }

    /// Opens `target` for `caller` (none: an anonymous visitor of a public
    /// app): a stream on this server ([`Opened::Local`]), or the server that
    /// holds the target's agent ([`Opened::OnServer`]) when `may_relay` (the
    /// request was not relayed to this server already).
    pub async fn open<T: Target>(
        &self,
        caller: Option<&Caller>,
        target: &T,
        may_relay: bool,
    ) -> Result<Opened<T::Stream>, T::Refusal> {
        target.open_in(self, caller, may_relay).await
    }

    /// Where a person's connection that opened on another server goes: its
    /// request opened there, with their `token` (refused there: refused
    /// here, as it was).
    pub async fn reach(
        &self,
        opened: Opened<Connection>,
        request: &ConnectRequest,
        token: &str,
    ) -> Result<Reached, Refused> {
        Ok(match opened {
            Opened::Local(connection) => Reached::Agent(Box::new(connection)),
            Opened::OnServer(url) => {
                Reached::Server(Box::new(relay::open(&url, request, token).await?))
            }
        })
    }

    /// Carries a person's connection to `workspace` on their upgraded
    /// `socket` until either side ends it or `token` stops opening anything.
    pub async fn carry(
        &self,
        socket: axum::extract::ws::WebSocket,
        reached: Reached,
        token: String,
        workspace: &str,
    ) {
        sockets::carry(&self.control, socket, reached, token, workspace).await;
    }

    /// Carries an agent's tunnel on its upgraded `socket` until it ends.
    pub async fn serve_agent_tunnel<S, E>(&self, socket: S, tunnel: AgentSocket)
    where
        S: futures_util::Stream<Item = Result<tokio_tungstenite::tungstenite::Message, E>>
            + futures_util::Sink<tokio_tungstenite::tungstenite::Message>
            + Unpin,
    {
        sockets::serve_agent_tunnel(&self.tunnels, socket, tunnel).await;
    }

    /// An agent's dial-back (`GET /agent/streams`): switched to the bytes of
    /// the stream that waits for its ticket.
    pub fn accept_dial_back(
        &self,
        agent: &abode_store::Agent,
        request: axum::extract::Request,
    ) -> Result<axum::response::Response, Refused> {
        ws_upgrade::accept_dial_back(&self.dial_backs, agent, request)
    }

    /// The agents' tunnels: registered here, and where an agent is.
    pub fn tunnels(&self) -> &Tunnels {
        &self.tunnels
    }

    /// The streams waiting for their agent to dial back.
    pub fn dial_backs(&self) -> &DialBacks {
        &self.dial_backs
    }

    /// People's connections: what one would be refused for.
    pub fn connections(&self) -> &Connections {
        &self.connections
    }

    /// Apps and shared ports, and an app host's sign-in.
    pub fn apps(&self) -> &Apps {
        &self.apps
    }
}

/// An open in progress.
pub type Opening<'a, S, R> = Pin<Box<dyn Future<Output = Result<Opened<S>, R>> + Send + 'a>>;

/// What [`Gateway::open`] opens: a person's connection
/// ([`ConnectRequest`]) or an app ([`AppAddress`]).
pub trait Target: Sync {
    /// What is opened on this server.
    type Stream;
    /// Why it is not opened.
    type Refusal;

    /// Opens this target through `gateway`'s parts.
    fn open_in<'a>(
        &'a self,
        gateway: &'a Gateway,
        caller: Option<&'a Caller>,
        may_relay: bool,
    ) -> Opening<'a, Self::Stream, Self::Refusal>;
}

impl Target for ConnectRequest {
    type Stream = Connection;
    type Refusal = ControlError;

    fn open_in<'a>(
        &'a self,
        gateway: &'a Gateway,
        caller: Option<&'a Caller>,
        may_relay: bool,
    ) -> Opening<'a, Connection, ControlError> {
        Box::pin(async move {
            // A connection is always a person's.
            let caller = caller.ok_or_else(|| {
                ControlError::Unauthorized("missing session token: log in first".into())
            })?;
            gateway.connections.open(caller, self, may_relay).await
        })
    }
}

impl Target for AppAddress {
    type Stream = AppStream;
    type Refusal = AppRefusal;

    fn open_in<'a>(
        &'a self,
        gateway: &'a Gateway,
        caller: Option<&'a Caller>,
        may_relay: bool,
    ) -> Opening<'a, AppStream, AppRefusal> {
        Box::pin(gateway.apps.open_app(caller, self, may_relay))
    }
}
