//! The upgrades of an agent's connections: its tunnel's WebSocket, whose
//! socket reads its connection in large pieces, and a dial-back, switched
//! to the bytes of the stream that waits for it.
//!
//! tungstenite 0.24 (under axum's `WebSocketUpgrade`) reads its socket
//! 4 KiB at a time, so a tunnel carrying an app's download at 600 MB/s cost
//! the server 150,000 `recv` calls a second, a large part of its CPU on a
//! two-core machine. This upgrade answers the handshake as axum's does
//! (RFC 6455: `Upgrade`, `Connection`, version 13, the key's accept value)
//! and hands tungstenite the upgraded connection behind a read buffer of
//! [`READ_BUFFER`], so a frame arrives in a system call or two.

use std::future::Future;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use tokio::io::BufReader;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::WebSocketStream;

use abode_store::Agent;
use abode_tunnel::dial_back;

use crate::dial_backs::DialBacks;
use crate::relay::Refused;

/// How much of the connection one read takes: a few of the tunnel's
/// largest frames.
pub const READ_BUFFER: usize = 256 * 1024;

/// The upgraded connection, as tungstenite's stream.
pub type Socket = WebSocketStream<BufReader<TokioIo<Upgraded>>>;

/// A request to upgrade to a WebSocket; rejected (so `Option` of it is
/// `None`) for anything else.
pub struct BufferedUpgrade {
    accept: HeaderValue,
    on_upgrade: OnUpgrade,
}

/// Why a request is no WebSocket upgrade.
#[derive(Debug)]
pub struct NotAnUpgrade;

impl IntoResponse for NotAnUpgrade {
    fn into_response(self) -> Response {
        StatusCode::UPGRADE_REQUIRED.into_response()
    }
}

/// Whether header `name` lists `token` (comma-separated, any case).
fn lists(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|value| {
        value.to_str().is_ok_and(|value| {
            value
                .split(',')
                .any(|item| item.trim().eq_ignore_ascii_case(token))
        })
    })
}

/// The `Sec-WebSocket-Accept` of a request that asks for a WebSocket
/// (RFC 6455, 4.2.1); `None` for any other.
fn accept_value(parts: &Parts) -> Option<HeaderValue> {
    if parts.method != Method::GET
        || !lists(&parts.headers, header::CONNECTION, "upgrade")
        || !lists(&parts.headers, header::UPGRADE, "websocket")
        || parts
            .headers
            .get(header::SEC_WEBSOCKET_VERSION)
            .is_none_or(|version| version.as_bytes() != b"13")
    {
        return None;
    }
    let key = parts.headers.get(header::SEC_WEBSOCKET_KEY)?;
    HeaderValue::from_str(&derive_accept_key(key.as_bytes())).ok()
}

#[axum::async_trait]
impl<S: Send + Sync> FromRequestParts<S> for BufferedUpgrade {
    type Rejection = NotAnUpgrade;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, NotAnUpgrade> {
        let accept = accept_value(parts).ok_or(NotAnUpgrade)?;
        let on_upgrade = parts.extensions.remove::<OnUpgrade>().ok_or(NotAnUpgrade)?;
        Ok(BufferedUpgrade { accept, on_upgrade })
    }
}

impl BufferedUpgrade {
    /// Answers `101 Switching Protocols` and, once the connection is
    /// upgraded, runs `serve` on its socket (with `config`'s limits).
    pub fn on_upgrade<F, Fut>(self, config: WebSocketConfig, serve: F) -> Response
    where
        F: FnOnce(Socket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let BufferedUpgrade { accept, on_upgrade } = self;
        tokio::spawn(async move {
            let upgraded = match on_upgrade.await {
                Ok(upgraded) => upgraded,
                Err(error) => {
                    tracing::debug!(%error, "a WebSocket upgrade did not complete");
                    return;
                }
            };
            let io = BufReader::with_capacity(READ_BUFFER, TokioIo::new(upgraded));
            let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
            serve(socket).await;
        });
        (
            StatusCode::SWITCHING_PROTOCOLS,
            [
                (header::CONNECTION, HeaderValue::from_static("upgrade")),
                (header::UPGRADE, HeaderValue::from_static("websocket")),
                (header::SEC_WEBSOCKET_ACCEPT, accept),
            ],
        )
            .into_response()
    }
}

/// An agent's connection for one stream (`GET /agent/streams`, its ticket
/// in [`dial_back::TICKET_HEADER`]): answered `101` and, once switched,
/// handed to the request waiting for it. A ticket this server does not
/// wait for (or another agent's) is a 404, after which the agent carries
/// the stream on its tunnel.
pub(crate) fn accept_dial_back(
    dial_backs: &DialBacks,
    agent: &Agent,
    mut request: axum::extract::Request,
) -> Result<Response, Refused> {
    let refused = |status, code, message: String| Refused {
        status,
        code,
        message,
    };
    let headers = request.headers();
    let ticket = headers
        .get(dial_back::TICKET_HEADER)
        .and_then(|value| value.to_str().ok())
        .filter(|ticket| dial_back::is_ticket(ticket))
        .map(str::to_string)
        .ok_or_else(|| {
            refused(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!(
                    "a dial-back names its stream's ticket in {} (64 hex digits)",
                    dial_back::TICKET_HEADER
                ),
            )
        })?;
    if !lists(headers, header::CONNECTION, "upgrade")
        || !lists(headers, header::UPGRADE, dial_back::UPGRADE_PROTOCOL)
    {
        return Err(refused(
            StatusCode::UPGRADE_REQUIRED,
            "upgrade_required",
            format!(
                "/agent/streams switches protocols: send Connection: upgrade and Upgrade: {}",
                dial_back::UPGRADE_PROTOCOL
            ),
        ));
    }
    let on_upgrade = request
        .extensions_mut()
        .remove::<OnUpgrade>()
        .ok_or_else(|| {
            refused(
                StatusCode::UPGRADE_REQUIRED,
                "upgrade_required",
                "this connection cannot switch protocols".into(),
            )
        })?;
    let deliver = dial_backs.dialed_back(agent, &ticket).ok_or_else(|| {
        refused(
            StatusCode::NOT_FOUND,
            "not_found",
            "no stream on this server waits for this ticket".into(),
        )
    })?;
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let stream: abode_tunnel::BoxedStream = Box::new(TokioIo::new(upgraded));
                // The request may have given up meanwhile: the connection
                // then closes here.
                let _ = deliver.send(stream);
            }
            Err(error) => tracing::debug!(%error, "an agent's dial-back did not switch protocols"),
        }
    });
    Ok((
        StatusCode::SWITCHING_PROTOCOLS,
        [
            (header::CONNECTION, HeaderValue::from_static("upgrade")),
            (
                header::UPGRADE,
                HeaderValue::from_static(dial_back::UPGRADE_PROTOCOL),
            ),
        ],
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, headers: &[(&str, &str)]) -> Parts {
        let mut request = axum::http::Request::builder()
            .method(method)
            .uri("/agent/connect");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        match request.body(()) {
            Ok(request) => request.into_parts().0,
            Err(error) => panic!("{error}"),
        }
    }

    #[test]
    fn only_a_websocket_handshake_is_answered_with_the_key_s_accept_value() {
        // RFC 6455's own example key and answer.
        let key = ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==");
        let version = ("sec-websocket-version", "13");
        let upgrade = ("upgrade", "websocket");
        let connection = ("connection", "Upgrade");
        type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, bool);
        let cases: [Case; 7] = [
            ("GET", vec![connection, upgrade, version, key], true),
            (
                "GET",
                vec![
                    ("connection", "keep-alive, upgrade"),
                    ("upgrade", "WebSocket"),
                    version,
                    key,
                ],
                true,
            ),
            ("POST", vec![connection, upgrade, version, key], false),
            (
                "GET",
                vec![("connection", "keep-alive"), upgrade, version, key],
                false,
            ),
            (
                "GET",
                vec![connection, ("upgrade", "h2c"), version, key],
                false,
            ),
            (
                "GET",
                vec![connection, upgrade, ("sec-websocket-version", "8"), key],
                false,
            ),
            ("GET", vec![connection, upgrade, version], false),
        ];
        for (method, headers, answered) in cases {
            let accept = accept_value(&parts(method, &headers));
            if answered {
                assert_eq!(
                    accept.as_ref().and_then(|value| value.to_str().ok()),
                    Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
                    "{method} {headers:?}"
                );
            } else {
                assert_eq!(accept, None, "{method} {headers:?}");
            }
        }
    }
}
