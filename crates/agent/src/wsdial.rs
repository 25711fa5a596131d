//! Opening the WebSockets of docs/ssh.md (the agent's tunnel, a person's
//! connection into a workspace), with the bearer token in the request's
//! header, never in the URL. A refusal before the upgrade is the server's
//! JSON error, returned as its one-line message.
//!
//! The agent dials its tunnel with [`dial_tunnel`]; `abode ssh` and `abode
//! port-forward` dial a person's connection with [`dial`] and carry it with
//! [`into_stream`]: one dial, so both ends of docs/ssh.md speak it alike.

use abode_client::connect::websocket_url;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{header, HeaderValue};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Largest message taken from the server (a tunnel frame or a chunk).
const MAX_MESSAGE: usize = abode_tunnel::frame::HEADER + abode_tunnel::frame::MAX_DATA;
/// The bytes of a person's connection go in messages of at most this much.
pub const CHUNK: usize = abode_tunnel::frame::MAX_DATA;

#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// The server answered, and refused (status and its message).
    #[error("{message}")]
    Refused { status: u16, message: String },
    #[error(transparent)]
    Url(#[from] abode_client::connect::ConnectUrlError),
    #[error("cannot connect to {url}: {reason}")]
    Connect { url: String, reason: String },
    /// The server's certificate was refused (one line: which, why, the fix).
    #[error("{0}")]
    Certificate(String),
}

/// Opens the WebSocket of `path` on the server at `base_url` as `token`.
pub async fn dial(base_url: &str, path: &str, token: &str) -> Result<Socket, DialError> {
    dial_tunnel(base_url, path, token)
        .await
        .map(|(socket, _)| socket)
}

/// [`dial`], saying the largest tunnel frame this side takes; with what
/// the server takes in turn (a server from before larger frames says
/// nothing: [`abode_tunnel::frame::PeerLimits::LEGACY`]).
pub async fn dial_tunnel(
    base_url: &str,
    path: &str,
    token: &str,
) -> Result<(Socket, abode_tunnel::frame::PeerLimits), DialError> {
    let url = websocket_url(base_url, path)?;
    let connect_error = |reason: String| DialError::Connect {
        url: url.clone(),
        reason,
    };
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|error| connect_error(error.to_string()))?;
    let bearer = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| connect_error("the token is not a valid header value".into()))?;
    request.headers_mut().insert(header::AUTHORIZATION, bearer);
    // Who connects, for the connection log (docs/connections.md).
    request.headers_mut().insert(
        header::USER_AGENT,
        HeaderValue::from_static(abode_client::USER_AGENT),
    );
    request.headers_mut().insert(
        abode_tunnel::frame::MAX_DATA_HEADER,
        HeaderValue::from(abode_tunnel::frame::MAX_DATA),
    );
    // The agent dials a stream back when the server asks (a person's
    // connection never is asked).
    request.headers_mut().insert(
        abode_tunnel::dial_back::DIAL_BACK_HEADER,
        HeaderValue::from_static("1"),
    );
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
        max_message_size: Some(MAX_MESSAGE),
        max_frame_size: Some(MAX_MESSAGE),
        ..Default::default()
    };
    let tls = tokio_tungstenite::Connector::Rustls(abode_tls::client_config());
    match tokio_tungstenite::connect_async_tls_with_config(request, Some(config), true, Some(tls))
        .await
    {
        Ok((socket, response)) => {
            let server_limits = abode_tunnel::frame::PeerLimits::from_header(
                response
                    .headers()
                    .get(abode_tunnel::frame::MAX_DATA_HEADER)
                    .and_then(|value| value.to_str().ok()),
            );
            Ok((socket, server_limits))
        }
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            let status = response.status().as_u16();
            let message = response
                .body()
                .as_deref()
                .and_then(|body| serde_json::from_slice::<serde_json::Value>(body).ok())
                .and_then(|body| {
                    body.pointer("/error/message")
                        .and_then(|m| m.as_str())
                        .map(str::to_string)
                })
                .unwrap_or_else(|| format!("the server refused the connection ({status})"));
            Err(DialError::Refused { status, message })
        }
        Err(error) => {
            let server = url.split_once("://").map_or(url.as_str(), |(_, rest)| {
                rest.split('/').next().unwrap_or(rest)
            });
            match abode_tls::explain(&error, server) {
                Some(line) => Err(DialError::Certificate(line)),
                None => Err(connect_error(error.to_string())),
            }
        }
    }
}

/// A person's connection as an ordinary byte stream: binary messages carry
/// the bytes, an empty one says "no more from this side" (both ways).
pub fn into_stream(socket: Socket) -> tokio::io::DuplexStream {
    use futures_util::{SinkExt, StreamExt};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_tungstenite::tungstenite::Message;

    let (user_end, our_end) = tokio::io::duplex(4 * CHUNK);
    tokio::spawn(async move {
        let (mut read, mut write) = tokio::io::split(our_end);
        let (mut sink, mut source) = socket.split();
        let upstream = async {
            let mut buffer = vec![0u8; CHUNK];
            loop {
                match read.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if sink
                            .send(Message::Binary(buffer[..n].to_vec()))
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            }
            let _ = sink.send(Message::Binary(Vec::new())).await;
        };
        // Reads until the server closes, so that its pings are answered
        // (by the socket itself) after its side has ended too.
        let downstream = async {
            let mut open = true;
            while let Some(Ok(message)) = source.next().await {
                match message {
                    Message::Binary(bytes) if open && bytes.is_empty() => {
                        open = false;
                        let _ = write.shutdown().await;
                    }
                    Message::Binary(bytes) if open => {
                        let written = write.write_all(&bytes).await;
                        if written.is_err() {
                            open = false;
                        }
                    }
                    Message::Close(_) => break,
                    _ => {}
                }
            }
            let _ = write.shutdown().await;
        };
        tokio::join!(upstream, downstream);
        if let Ok(mut socket) = sink.reunite(source) {
            let _ = socket.close(None).await;
        }
    });
    user_end
}
