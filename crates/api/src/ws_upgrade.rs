//! A WebSocket upgrade whose socket reads its connection in large pieces,
//! for an agent's tunnel.
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

/// How much of the connection one read takes: a few of the tunnel's
/// largest frames.
pub(crate) const READ_BUFFER: usize = 256 * 1024;

/// The upgraded connection, as tungstenite's stream.
pub(crate) type Socket = WebSocketStream<BufReader<TokioIo<Upgraded>>>;

/// A request to upgrade to a WebSocket; rejected (so `Option` of it is
/// `None`) for anything else.
pub(crate) struct BufferedUpgrade {
    accept: HeaderValue,
    on_upgrade: OnUpgrade,
}

/// Why a request is no WebSocket upgrade.
#[derive(Debug)]
pub(crate) struct NotAnUpgrade;

impl IntoResponse for NotAnUpgrade {
    fn into_response(self) -> Response {
        StatusCode::UPGRADE_REQUIRED.into_response()
    }
}

/// Whether header `name` lists `token` (comma-separated, any case).
pub(crate) fn lists(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
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
    pub(crate) fn on_upgrade<F, Fut>(self, config: WebSocketConfig, serve: F) -> Response
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
