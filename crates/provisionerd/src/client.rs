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
                .tls_config(abode_tls::client_config())
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

    /// PUTs the file at `file` as it is (streamed, never read into memory)
    /// to `/api/v1/provisionerd/{path}`, `query` its query; `None` for a
    /// 204. No deadline but the reads' (an archive takes its time).
    pub async fn put_file<T>(
        &self,
        path: &str,
        query: &[(&str, &str)],
        file: &std::path::Path,
    ) -> Result<Option<T>, CallError>
    where
        T: DeserializeOwned + Send + 'static,
    {
        let client = self.clone();
        let url = format!("{}/api/v1/provisionerd/{path}", self.base_url);
        let query: Vec<(String, String)> = query
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        let file = file.to_path_buf();
        tokio::task::spawn_blocking(move || {
            // Not the server's fault: said as a refusal, never tried again.
            let refused = |error: std::io::Error| CallError::Refused {
                status: 0,
                message: format!("cannot read {}: {error}", file.display()),
            };
            let opened = std::fs::File::open(&file).map_err(refused)?;
            let length = opened.metadata().map_err(refused)?.len();
            let mut request = client
                .http
                .put(&url)
                .set("Authorization", &format!("Bearer {}", client.key))
                .set("Content-Type", "application/x-tar")
                .set("Content-Length", &length.to_string());
            for (name, value) in &query {
                request = request.query(name, value);
            }
            client.answer(request.send(opened))
        })
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
        self.answer(answer)
    }

    /// A call's answer as the daemon acts on it.
    fn answer<T: DeserializeOwned>(
        &self,
        answer: Result<ureq::Response, ureq::Error>,
    ) -> Result<Option<T>, CallError> {
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
            // A refused certificate is said as such (it is retried, since
            // a certificate can be fixed at the server while this waits).
            Err(error) => Err(CallError::Unreachable(
                abode_tls::explain(&error, &self.base_url).unwrap_or_else(|| error.to_string()),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;

    use super::*;

    /// Answers one request with `answer` (a whole HTTP response) and hands
    /// back what the request's head said.
    fn answer_once(answer: &'static str) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let served = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap();
                }
                head.push_str(&line);
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).unwrap();
            let mut stream = stream;
            stream.write_all(answer.as_bytes()).unwrap();
            head
        });
        (url, served)
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Answer {
        canceled: bool,
    }

    /// What a call comes to: an answer, or a refusal's status (none: no
    /// answer) and words.
    type Expected = Result<Option<Answer>, (Option<u16>, &'static str)>;

    /// What the daemon does next depends on this one distinction: a refusal
    /// it must not retry, or no answer it must (a proxy's or a failing
    /// server's 5xx and a 429 are no answer).
    #[tokio::test]
    async fn each_answer_is_told_as_the_daemon_acts_on_it() {
        let json = |status: &str, body: &str| -> &'static str {
            Box::leak(
                format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .into_boxed_str(),
            )
        };
        let refusal = r#"{"error":{"code":"conflict","message":"build 7 is not this provisioner's job any more"}}"#;
        let cases: Vec<(&'static str, Expected)> = vec![
            (
                "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n",
                Ok(None),
            ),
            (
                json("200 OK", r#"{"canceled":true}"#),
                Ok(Some(Answer { canceled: true })),
            ),
            (
                json("409 Conflict", refusal),
                Err((Some(409), "build 7 is not this provisioner's job any more")),
            ),
            (
                json("401 Unauthorized", r#"{"error":{"message":"unknown key"}}"#),
                Err((Some(401), "unknown key")),
            ),
            (
                json("403 Forbidden", "not json"),
                Err((Some(403), "the server answered 403")),
            ),
            (
                json("503 Service Unavailable", r#"{"error":{"message":"busy"}}"#),
                Err((None, "busy")),
            ),
            (
                json("429 Too Many Requests", "{}"),
                Err((None, "the server answered 429")),
            ),
            (
                json("200 OK", "half an answer"),
                Err((None, "cannot read the server's answer")),
            ),
        ];
        for (answer, expected) in cases {
            let (url, served) = answer_once(answer);
            let client = ServerClient::new(&format!("{url}/"), "abode_pk_secret");
            let result = client
                .post::<_, Answer>("jobs/b/heartbeat", &serde_json::json!({"slot": "s"}))
                .await;
            let head = served.join().unwrap();
            assert!(
                head.starts_with("POST /api/v1/provisionerd/jobs/b/heartbeat HTTP/1.1"),
                "{head}"
            );
            assert!(
                head.contains("authorization: Bearer abode_pk_secret")
                    || head.contains("Authorization: Bearer abode_pk_secret"),
                "{head}"
            );
            match (result, expected) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{answer}"),
                (Err(CallError::Refused { status, message }), Err((Some(want), text))) => {
                    assert_eq!(status, want, "{answer}");
                    assert_eq!(message, text, "{answer}");
                }
                (Err(CallError::Unreachable(message)), Err((None, text))) => {
                    assert!(message.contains(text), "{answer}: {message}");
                }
                (got, want) => panic!("{answer}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_server_cut_off_mid_call_is_unreachable_and_the_key_is_never_shown() {
        // It takes the connection and closes it without a word.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let cut = std::thread::spawn(move || drop(listener.accept().unwrap()));
        let client = ServerClient::new(&url, "abode_pk_secret");
        let result = client
            .post::<_, Answer>("acquire", &serde_json::json!({}))
            .await;
        cut.join().unwrap();
        assert!(
            matches!(result, Err(CallError::Unreachable(_))),
            "{result:?}"
        );
        assert!(!format!("{client:?}").contains("abode_pk_secret"));
        assert!(CallError::Refused {
            status: 401,
            message: String::new()
        }
        .is_unauthorized());
        assert!(CallError::Refused {
            status: 409,
            message: String::new()
        }
        .is_lost());
        assert!(!CallError::Unreachable(String::new()).is_lost());
    }
}
