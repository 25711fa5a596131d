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
//! - `GET /agent/streams` (agent token, the ticket in
//!   `x-abode-stream-ticket`, `Upgrade: abode-stream`):
//!   an agent dialing back for one stream the server asked it to
//!   ([`abode_tunnel::dial_back`]); after the `101` the connection is the
//!   stream's bytes, handed to the request that waits for it.
//!
//! Every refusal is an ordinary JSON answer before the upgrade: the stream
//! to the agent is opened first, so a client never sees a 101 for a
//! connection that cannot work. What flows on the sockets is the gateway's
//! (`abode-gateway`); these handlers read the requests and upgrade them.

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use abode_gateway::{AgentSocket, ConnectRequest, MAX_MESSAGE};
use abode_tunnel::{dial_back, frame, StreamKind};

use crate::extract::AgentWithToken;
use crate::{ApiError, AppState};
use abode_gateway::BufferedUpgrade;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

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

async fn agent_connect(
    State(state): State<AppState>,
    AgentWithToken { agent, token }: AgentWithToken,
    headers: HeaderMap,
    upgrade: Option<BufferedUpgrade>,
) -> Result<Response, ApiError> {
    let upgrade = upgrade.ok_or_else(|| upgrade_required("/agent/connect"))?;
    // An agent from before larger frames and windows says nothing, and
    // gets the frames and window it takes.
    let limits = frame::PeerLimits::from_header(
        headers
            .get(frame::MAX_DATA_HEADER)
            .and_then(|value| value.to_str().ok()),
    );
    // A tunnel's frames are read in large pieces (`BufferedUpgrade`): a
    // download through it is a stream of its largest frames.
    let config = WebSocketConfig {
        max_message_size: Some(MAX_MESSAGE),
        max_frame_size: Some(MAX_MESSAGE),
        ..WebSocketConfig::default()
    };
    let dials_back = headers
        .get(dial_back::DIAL_BACK_HEADER)
        .is_some_and(|value| value.as_bytes() == b"1");
    let tunnel = AgentSocket {
        agent,
        token,
        limits,
        dials_back,
    };
    let mut response = upgrade.on_upgrade(config, move |socket| async move {
        state.gateway.serve_agent_tunnel(socket, tunnel).await;
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

/// An agent's connection for one stream (its ticket), switched to the
/// stream's bytes by the gateway.
async fn agent_stream(
    State(state): State<AppState>,
    AgentWithToken { agent, .. }: AgentWithToken,
    request: axum::extract::Request,
) -> Result<Response, ApiError> {
    Ok(state.gateway.accept_dial_back(&agent, request)?)
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
    /// The terminal a `pty` connection asks for; the gateway refuses
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
        crate::extract::route_scope(parts, &caller.scope)?;
        Ok(Connecting { caller, token })
    }
}

async fn workspace_connect(
    State(state): State<AppState>,
    Connecting { caller, token }: Connecting,
    Path(workspace): Path<String>,
    Query(query): Query<ConnectQuery>,
    headers: HeaderMap,
    client: Option<axum::Extension<abode_control::ClientAddress>>,
    upgrade: Option<WebSocketUpgrade>,
) -> Result<Response, ApiError> {
    let kind: StreamKind = query.kind.parse().map_err(ApiError::bad_request)?;
    let request = ConnectRequest {
        workspace: workspace.clone(),
        kind,
        port: query.port,
        agent: query.agent.clone(),
        terminal: query.terminal(),
        app: query.app.clone(),
        client: connection_client(&headers, client.map(|client| client.0)),
    };
    let may_relay = !abode_gateway::is_relayed(&headers);
    let Some(upgrade) = upgrade else {
        // Everything a connection would be refused for, then the 426.
        state.gateway.connections().check(&caller, &request).await?;
        return Err(upgrade_required("/workspaces/{ws}/connect"));
    };
    let opened = state
        .gateway
        .open(Some(&caller), &request, may_relay)
        .await?;
    // A relay is opened before the upgrade: a refusal there is answered here.
    let reached = state.gateway.reach(opened, &request, &token).await?;
    let upgrade = upgrade.max_message_size(MAX_MESSAGE);
    Ok(upgrade
        .on_upgrade(move |socket| async move {
            state
                .gateway
                .carry(socket, reached, token, &workspace)
                .await;
        })
        .into_response())
}

/// Where a connection came from, for the connection log: the client's
/// address and user agent; on a relayed request, the address the relaying
/// server named and that server's (`A via B`: what was said, and who said
/// it, since any client may send the header).
fn connection_client(
    headers: &HeaderMap,
    client: Option<abode_control::ClientAddress>,
) -> abode_gateway::ConnectionClient {
    let text = |name| {
        headers
            .get(name)
            .and_then(|value: &HeaderValue| value.to_str().ok())
            .map(|value| value.chars().take(512).collect::<String>())
    };
    let peer = client.map(|client| client.ip.to_string());
    let ip = match (
        abode_gateway::is_relayed(headers),
        text(abode_gateway::RELAYED_FOR_HEADER),
    ) {
        (true, Some(relayed_for)) => Some(match peer {
            Some(peer) => format!("{relayed_for} via {peer}"),
            None => relayed_for,
        }),
        _ => peer,
    };
    abode_gateway::ConnectionClient {
        ip,
        user_agent: text(axum::http::header::USER_AGENT.as_str()),
    }
}
