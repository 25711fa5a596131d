//! Relaying a person's connection into a workspace to the server that holds
//! the workspace agent's tunnel (several servers on one database): the
//! agent is connected to one server, a person may reach any. (An app's
//! request is relayed as HTTP, `proxy.rs`.)
//!
//! The relaying server has authorized the request already; it opens the same
//! request on the holding server (found in the database with the URL it
//! gave, `Config::relay_url`) with the person's own credentials, so that
//! server authorizes and audits the connection as its own, and a relayed
//! request is never relayed again (the [`RELAYED_HEADER`]). A refusal there
//! is answered here as it was given, before any upgrade.

use axum::extract::ws::{Message, WebSocket};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use abode_sdk::percent_encode as encode;

use crate::connections::ConnectRequest;

/// Marks a request relayed by another server.
pub const RELAYED_HEADER: &str = "x-abode-relayed";
/// The client address the relaying server saw (the holding server logs it
/// as `ADDRESS via RELAYING-SERVER`: what was said, and who said it).
pub const RELAYED_FOR_HEADER: &str = "x-abode-relayed-for";

/// The open connection to the holding server.
pub type Upstream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A relay refused, here or by the holding server: the answer the API
/// gives (its status, its error code of docs/api.md, one line).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

/// What is relayed: the workspace as the person named it, and the query.
struct RelayTarget<'a> {
    relay_url: &'a str,
    workspace: &'a str,
    kind: &'a str,
    port: Option<u16>,
    agent: Option<&'a str>,
    terminal: Option<&'a abode_tunnel::TerminalOpen>,
    client: &'a crate::ConnectionClient,
}

impl RelayTarget<'_> {
    fn url(&self) -> Result<String, Refused> {
        let (scheme, base) = match self.relay_url.split_once("://") {
            Some(("http", base)) => ("ws", base),
            Some(("https", base)) => ("wss", base),
            _ => {
                return Err(unreachable_server(
                    self.relay_url,
                    "neither an http:// nor an https:// URL",
                ))
            }
        };
        let base = base.trim_end_matches('/');
        let mut url = format!(
            "{scheme}://{base}/api/v1/workspaces/{}/connect?kind={}",
            encode(self.workspace),
            encode(self.kind)
        );
        if let Some(port) = self.port {
            url.push_str(&format!("&port={port}"));
        }
        if let Some(agent) = self.agent {
            url.push_str(&format!("&agent={}", encode(agent)));
        }
        if let Some(terminal) = self.terminal {
            url.push_str(&format!(
                "&session={}&rows={}&cols={}&offset={}",
                encode(&terminal.session),
                terminal.rows,
                terminal.cols,
                terminal.offset
            ));
        }
        Ok(url)
    }
}

fn unreachable_server(url: &str, why: impl std::fmt::Display) -> Refused {
    Refused {
        status: StatusCode::SERVICE_UNAVAILABLE,
        code: "unavailable",
        message: format!(
            "the workspace's agent is connected to another server ({url}), which cannot be reached now: {why}; try again"
        ),
    }
}

/// Opens the person's `request` on the holding server at `relay_url`, with
/// their credentials (the token they connected with, a bearer token or the
/// dashboard's session, always as a bearer token there).
pub async fn open(
    relay_url: &str,
    request: &ConnectRequest,
    token: &str,
) -> Result<Upstream, Refused> {
    let target = RelayTarget {
        relay_url,
        workspace: &request.workspace,
        kind: request.kind.as_str(),
        port: request.port,
        agent: request.agent.as_deref(),
        terminal: request.terminal.as_ref(),
        client: &request.client,
    };
    let mut request = target
        .url()?
        .into_client_request()
        .map_err(|error| unreachable_server(target.relay_url, error))?;
    request.headers_mut().insert(
        tungstenite::http::header::AUTHORIZATION,
        tungstenite::http::HeaderValue::from_str(&format!("Bearer {token}")).map_err(|error| {
            Refused {
                status: StatusCode::BAD_REQUEST,
                code: "bad_request",
                message: format!("bad token: {error}"),
            }
        })?,
    );
    request.headers_mut().insert(
        RELAYED_HEADER,
        tungstenite::http::HeaderValue::from_static("1"),
    );
    // Who connected, for the holding server's connection log.
    let client = &target.client;
    if let Some(value) = client
        .ip
        .as_deref()
        .and_then(|ip| tungstenite::http::HeaderValue::from_str(ip).ok())
    {
        request.headers_mut().insert(RELAYED_FOR_HEADER, value);
    }
    if let Some(value) = client
        .user_agent
        .as_deref()
        .and_then(|agent| tungstenite::http::HeaderValue::from_str(agent).ok())
    {
        request
            .headers_mut()
            .insert(tungstenite::http::header::USER_AGENT, value);
    }
    // The servers' trust: the system's authorities and --ca-cert.
    let tls = tokio_tungstenite::Connector::Rustls(abode_tls::client_config());
    match tokio_tungstenite::connect_async_tls_with_config(request, None, false, Some(tls)).await {
        Ok((upstream, _)) => {
            tracing::info!(server = %target.relay_url, workspace = %target.workspace,
                "relaying a connection to the server that holds the agent's tunnel");
            Ok(upstream)
        }
        Err(tungstenite::Error::Http(response)) => Err(refusal(
            response.status().as_u16(),
            response.body().as_deref().unwrap_or_default(),
        )),
        Err(error) => Err(unreachable_server(target.relay_url, error)),
    }
}

/// The holding server's refusal, as this server answers it.
fn refusal(status: u16, body: &[u8]) -> Refused {
    let (code, message) = serde_json::from_slice::<abode_sdk::ErrorEnvelope>(body)
        .ok()
        .map(|envelope| (envelope.error.code, envelope.error.message))
        .unwrap_or_else(|| (String::new(), format!("the other server answered {status}")));
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // The codes are a fixed set (docs/api.md, Errors).
    let code = match code.as_str() {
        "bad_request" => "bad_request",
        "unauthorized" => "unauthorized",
        "forbidden" => "forbidden",
        "not_found" => "not_found",
        "conflict" => "conflict",
        "too_many_requests" => "too_many_requests",
        "unavailable" => "unavailable",
        _ => "internal",
    };
    Refused {
        status,
        code,
        message,
    }
}

/// Moves messages between the person's socket and the holding server's
/// until either side closes. The bytes are the holding server's stream
/// messages as they are (an empty binary message is still a half-close).
pub(crate) async fn pipe(socket: WebSocket, upstream: Upstream) {
    let (mut to_person, mut from_person) = socket.split();
    let (mut to_server, mut from_server) = upstream.split();
    let up = async {
        while let Some(Ok(message)) = from_person.next().await {
            let relayed = match message {
                Message::Binary(bytes) => tungstenite::Message::Binary(bytes),
                Message::Close(_) => break,
                _ => continue,
            };
            if to_server.send(relayed).await.is_err() {
                return;
            }
        }
        let _ = to_server.send(tungstenite::Message::Close(None)).await;
    };
    let down = async {
        while let Some(Ok(message)) = from_server.next().await {
            let relayed = match message {
                tungstenite::Message::Binary(bytes) => Message::Binary(bytes),
                tungstenite::Message::Close(_) => break,
                _ => continue,
            };
            if to_person.send(relayed).await.is_err() {
                return;
            }
        }
        let _ = to_person.send(Message::Close(None)).await;
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}

/// Whether a request came relayed from another server.
pub fn is_relayed(headers: &HeaderMap) -> bool {
    headers.get(RELAYED_HEADER) == Some(&HeaderValue::from_static("1"))
}
