//! The metadata reports' WebSocket (`GET /agent/metadata/stream`): one
//! JSON message per report on a socket the agent keeps open, authenticated
//! once when it opens. A report a second from every workspace was an HTTP
//! request each, and the server's request path cost most of it
//! (docs/benchmarks.md, "Live metadata"). A server without the route (or a
//! socket that broke) gets `POST /agent/metadata` until the socket can be
//! opened again.

use std::time::{Duration, Instant};

use abode_sdk::requests::AgentMetadataReport;
use futures_util::SinkExt;
use tokio_tungstenite::tungstenite::Message;

use crate::wsdial::{dial, Socket};

/// The path of the reports' socket.
const PATH: &str = "/agent/metadata/stream";
/// How long after a failed open the socket is tried again.
const RETRY: Duration = Duration::from_secs(30);

/// A socket to send reports on, opened when it can be.
pub(crate) struct ReportStream {
    url: String,
    token: String,
    runtime: Option<tokio::runtime::Runtime>,
    socket: Option<Socket>,
    retry_at: Instant,
}

impl ReportStream {
    pub(crate) fn new(url: &str, token: &str) -> ReportStream {
        ReportStream {
            url: url.to_string(),
            token: token.to_string(),
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok(),
            socket: None,
            retry_at: Instant::now(),
        }
    }

    /// Sends `report` on the socket (opened first if need be); false when
    /// it could not, for the caller to post it instead.
    pub(crate) fn send(&mut self, report: &AgentMetadataReport) -> bool {
        let Some(runtime) = &self.runtime else {
            return false;
        };
        let Ok(text) = serde_json::to_string(report) else {
            return false;
        };
        if self.socket.is_none() {
            if Instant::now() < self.retry_at {
                return false;
            }
            self.retry_at = Instant::now() + RETRY;
            self.socket = runtime
                .block_on(async {
                    tokio::time::timeout(
                        Duration::from_secs(10),
                        dial(&self.url, PATH, &self.token),
                    )
                    .await
                })
                .ok()
                .and_then(Result::ok);
        }
        let Some(socket) = &mut self.socket else {
            return false;
        };
        let sent = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), socket.send(Message::Text(text))).await
        });
        if matches!(sent, Ok(Ok(()))) {
            return true;
        }
        self.socket = None;
        false
    }
}
