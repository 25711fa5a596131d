//! The daemon's calls to the server (`/api/v1/provisionerd/...`), each on a
//! blocking thread, with the one distinction the daemon acts on: the
//! server could not be reached (try again later) or it answered no (don't).

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Longer than the longest acquire wait the daemon asks for.
const READ_TIMEOUT: Duration = Duration::from_secs(120);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Well within a job lease (60 s by default; renewed every second).
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// No answer: the server is down, restarting or cut off.
    #[error("cannot reach the server: {0}")]
    Unreachable(String),
    /// The server answered with a refusal; its one-line message.
    #[error("{message}")]
    Refused { status: u16, message: String },
}

impl CallError {
    /// The key was deleted or never valid: the daemon cannot go on.
    pub fn is_unauthorized(&self) -> bool {
        matches!(self, CallError::Refused { status: 401, .. })
    }

    /// The build is not this daemon's any more (its lease ran out, or it ended).
    pub fn is_lost(&self) -> bool {
        matches!(self, CallError::Refused { status: 409, .. })
    }
}

/// The server's API, authenticated with a provisioner key.
#[derive(Clone)]
pub struct ServerClient {
    base_url: String,
    key: String,
    http: ureq::Agent,
}

impl std::fmt::Debug for ServerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerClient")
            .field("base_url", &self.base_url)
            .field("key", &"(hidden)")
            .finish()
    }
}

impl ServerClient {
    pub fn new(base_url: &str, key: &str) -> ServerClient {
        ServerClient {
            base_url: base_url.trim_end_matches('/').to_string(),
            key: key.to_string(),
            http: ureq::AgentBuilder::new()
                .timeout_connect(CONNECT_TIMEOUT)
                .timeout_read(READ_TIMEOUT)
                .build(),
        }
    }

    /// POSTs `body` to `/api/v1/provisionerd/{path}`; `None` for a 204.
    pub async fn post<B, T>(&self, path: &str, body: &B) -> Result<Option<T>, CallError>
    where
        B: Serialize + ?Sized,
        T: DeserializeOwned + Send + 'static,
    {
        let body = serde_json::to_vec(body)
            .map_err(|error| CallError::Unreachable(format!("cannot encode a request: {error}")))?;
        let client = self.clone();
        let url = format!("{}/api/v1/provisionerd/{path}", self.base_url);
        tokio::task::spawn_blocking(move || client.post_blocking(&url, &body))
            .await
            .map_err(|error| CallError::Unreachable(format!("the call's thread failed: {error}")))?
    }

    fn post_blocking<T: DeserializeOwned>(
        &self,
        url: &str,
        body: &[u8],
    ) -> Result<Option<T>, CallError> {
        // A heartbeat that hangs must not outlive the lease it renews.
        let timeout = if url.ends_with("/heartbeat") {
            HEARTBEAT_TIMEOUT
        } else {
            READ_TIMEOUT
        };
        let answer = self
            .http
            .post(url)
            .timeout(timeout)
            .set("Authorization", &format!("Bearer {}", self.key))
            .set("Content-Type", "application/json")
            .send_bytes(body);
        match answer {
            Ok(response) if response.status() == 204 => Ok(None),
            Ok(response) => response.into_json::<T>().map(Some).map_err(|error| {
                CallError::Unreachable(format!("cannot read the server's answer: {error}"))
            }),
            Err(ureq::Error::Status(status, response)) => {
                let message = response
                    .into_json::<serde_json::Value>()
                    .ok()
                    .and_then(|body| {
                        body.pointer("/error/message")
                            .and_then(|message| message.as_str())
                            .map(str::to_string)
                    })
                    .unwrap_or_else(|| format!("the server answered {status}"));
                // A proxy's, a restarting server's or a failing database's
                // refusal is not the server's answer: try again.
                if matches!(status, 429 | 500..=599) {
                    return Err(CallError::Unreachable(message));
                }
                Err(CallError::Refused { status, message })
            }
            Err(error) => Err(CallError::Unreachable(error.to_string())),
        }
    }
}
