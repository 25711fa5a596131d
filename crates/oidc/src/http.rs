//! The HTTP client of the protocol: ureq (the client the rest of Abode
//! uses) with Abode's one TLS trust (`abode_tls::client_config`: the
//! system's authorities plus `--ca-cert`), so that a provider signed by a
//! company's private authority is trusted exactly as the server's webhooks
//! and relays trust it. No redirects are followed (a discovery document or
//! key set that moved is a configuration to fix, not a hop to take), and
//! every request is bounded in time and size.

use std::io::Read;
use std::time::Duration;

use openidconnect::http::{HeaderValue, Response, StatusCode};
use openidconnect::{HttpRequest, HttpResponse};

/// The longest one request to the provider may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read (discovery documents and key sets are a few KiB).
const MAX_BODY: u64 = 1024 * 1024;

/// Why a request to the provider got no answer.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0}")]
    Transport(String),
    #[error("the answer of {0} is larger than 1 MiB")]
    TooLarge(String),
}

/// The client `openidconnect` calls (its `SyncHttpClient`): blocking, so
/// callers run it off the async threads.
#[derive(Clone)]
pub struct Http {
    agent: ureq::Agent,
}

impl Default for Http {
    fn default() -> Http {
        Http::new()
    }
}

impl Http {
    pub fn new() -> Http {
        Http {
            agent: ureq::AgentBuilder::new()
                .timeout(TIMEOUT)
                .redirects(0)
                .tls_config(abode_tls::client_config())
                .user_agent(concat!("abode/", env!("CARGO_PKG_VERSION")))
                .build(),
        }
    }

    /// One request and its answer, whatever its status (the protocol reads
    /// a provider's error answers).
    pub fn call(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let url = request.uri().to_string();
        let mut outgoing = self.agent.request(request.method().as_str(), &url);
        for (name, value) in request.headers() {
            if let Ok(value) = value.to_str() {
                outgoing = outgoing.set(name.as_str(), value);
            }
        }
        let answered = if request.body().is_empty() {
            outgoing.call()
        } else {
            outgoing.send_bytes(request.body())
        };
        let response = match answered {
            Ok(response) => response,
            Err(ureq::Error::Status(_, response)) => response,
            Err(ureq::Error::Transport(error)) => {
                let line = abode_tls::explain(&error, &origin_of(&url))
                    .unwrap_or_else(|| format!("cannot reach {}: {error}", origin_of(&url)));
                return Err(HttpError::Transport(line));
            }
        };
        let status = StatusCode::from_u16(response.status())
            .map_err(|error| HttpError::Transport(error.to_string()))?;
        let content_type = response.header("content-type").map(str::to_string);
        let mut body = Vec::new();
        response
            .into_reader()
            .take(MAX_BODY + 1)
            .read_to_end(&mut body)
            .map_err(|error| {
                HttpError::Transport(format!("reading {}: {error}", origin_of(&url)))
            })?;
        if body.len() as u64 > MAX_BODY {
            return Err(HttpError::TooLarge(origin_of(&url)));
        }
        let mut answer = Response::builder().status(status);
        if let Some(value) = content_type.and_then(|value| HeaderValue::from_str(&value).ok()) {
            answer = answer.header("content-type", value);
        }
        answer
            .body(body)
            .map_err(|error| HttpError::Transport(error.to_string()))
    }
}

impl openidconnect::SyncHttpClient for Http {
    type Error = HttpError;

    fn call(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        Http::call(self, request)
    }
}

/// `scheme://host[:port]` of a URL, for messages (no path, no query: a
/// query may carry a code).
pub(crate) fn origin_of(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
            format!("{scheme}://{authority}")
        }
        None => String::from("the provider"),
    }
}
