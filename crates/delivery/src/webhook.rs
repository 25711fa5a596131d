//! The webhook channel: each message POSTed as JSON (a documented, versioned
//! schema, docs/notifications.md) to the operator's URL, signed with HMAC-
//! SHA256 of the body under a shared secret, with the message's stable id
//! so that the receiver can drop repeats. A 2xx answer within the timeout
//! is a delivery; anything else is a failed attempt.

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;

use abode_store::{Notification, User};

/// The version of the webhook body's schema.
pub const WEBHOOK_SCHEMA_VERSION: u32 = 1;

/// Where the webhook goes and how it is signed.
#[derive(Clone)]
pub struct WebhookConfig {
    /// An `http` or `https` URL.
    pub url: String,
    /// The shared secret of `X-Abode-Signature`.
    pub secret: Vec<u8>,
    /// The longest one delivery may take.
    pub timeout: Duration,
}

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("url", &self.url)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Why the webhook flags were refused at start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookConfigError {
    #[error(
        "--notifications-webhook-url must be an http:// or https:// URL with a host, not `{0}`"
    )]
    Url(String),
    #[error("--notifications-webhook-url needs --notifications-webhook-secret-file (the receiver checks X-Abode-Signature)")]
    NoSecret,
    #[error("cannot read the webhook secret file {path}: {source}")]
    Secret {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the webhook secret file {0} is empty")]
    EmptySecret(String),
}

impl WebhookConfig {
    /// The webhook of `url`, signed with the secret in `secret_file` (its
    /// content without the final line break).
    pub fn from_flags(
        url: &str,
        secret_file: Option<&std::path::Path>,
        timeout: Duration,
    ) -> Result<WebhookConfig, WebhookConfigError> {
        let shown: String = url.chars().take(200).collect();
        let lower = url.to_ascii_lowercase();
        let rest = lower
            .strip_prefix("http://")
            .or_else(|| lower.strip_prefix("https://"))
            .ok_or_else(|| WebhookConfigError::Url(shown.clone()))?;
        if rest.is_empty()
            || rest.starts_with('/')
            || url.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(WebhookConfigError::Url(shown));
        }
        let path = secret_file.ok_or(WebhookConfigError::NoSecret)?;
        let secret = std::fs::read(path).map_err(|source| WebhookConfigError::Secret {
            path: path.display().to_string(),
            source,
        })?;
        let secret = secret
            .strip_suffix(b"\n")
            .map(|s| s.strip_suffix(b"\r").unwrap_or(s))
            .unwrap_or(&secret)
            .to_vec();
        if secret.is_empty() {
            return Err(WebhookConfigError::EmptySecret(path.display().to_string()));
        }
        Ok(WebhookConfig {
            url: url.to_string(),
            secret,
            timeout,
        })
    }
}

/// `sha256=<hex HMAC-SHA256 of body under secret>`: the `X-Abode-Signature`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    // HMAC takes a key of any length.
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => return String::new(),
    };
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The body of one message (schema version [`WEBHOOK_SCHEMA_VERSION`]).
pub(crate) fn body(message: &Notification, recipient: &User) -> Vec<u8> {
    let payload: serde_json::Value =
        serde_json::from_str(&message.payload).unwrap_or(serde_json::Value::Null);
    json!({
        "schema_version": WEBHOOK_SCHEMA_VERSION,
        "id": message.id,
        "kind": message.kind.as_str(),
        "created_at": message.created_at,
        "recipient": {
            "id": recipient.id,
            "username": recipient.username,
            "email": recipient.email,
        },
        "payload": payload,
    })
    .to_string()
    .into_bytes()
}

/// Posts one message; `Err` says in one line why it was not delivered.
pub(crate) async fn deliver(
    config: &WebhookConfig,
    message: &Notification,
    recipient: &User,
) -> Result<(), String> {
    let body = body(message, recipient);
    let signature = signature(&config.secret, &body);
    let url = config.url.clone();
    let id = message.id.clone();
    let timeout = config.timeout;
    tokio::task::spawn_blocking(move || {
        let agent = ureq::AgentBuilder::new()
            .timeout(timeout)
            .redirects(0)
            // The system's authorities plus the server's --ca-cert.
            .tls_config(abode_tls::client_config())
            .build();
        let sent = agent
            .post(&url)
            .set("Content-Type", "application/json")
            .set("User-Agent", "abode-notifications")
            .set("X-Abode-Signature", &signature)
            .set("X-Abode-Delivery", &id)
            .send_bytes(&body);
        match sent {
            Ok(response) if (200..300).contains(&response.status()) => Ok(()),
            Ok(response) => Err(format!("the webhook answered HTTP {}", response.status())),
            Err(ureq::Error::Status(code, _)) => Err(format!("the webhook answered HTTP {code}")),
            Err(ureq::Error::Transport(error)) => match abode_tls::explain(&error, &url) {
                Some(line) => Err(one_line(&line)),
                None => Err(one_line(&format!("cannot reach the webhook: {error}"))),
            },
        }
    })
    .await
    .map_err(|error| format!("the webhook delivery stopped: {error}"))?
}

/// At most one bounded line, for `last_error`.
fn one_line(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect();
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_urls_and_readable_secrets_are_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "s3cret\n").unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let missing = dir.path().join("missing");
        let timeout = Duration::from_secs(1);
        let cases: [(&str, &std::path::Path, Option<&str>); 7] = [
            ("http://127.0.0.1:9/hook", &secret, None),
            ("HTTPS://hooks.example.com/x", &secret, None),
            (
                "ftp://example.com",
                &secret,
                Some("must be an http:// or https:// URL"),
            ),
            (
                "http://",
                &secret,
                Some("must be an http:// or https:// URL"),
            ),
            (
                "http://a b",
                &secret,
                Some("must be an http:// or https:// URL"),
            ),
            (
                "http://example.com",
                &missing,
                Some("cannot read the webhook secret file"),
            ),
            ("http://example.com", &empty, Some("is empty")),
        ];
        for (url, file, refused) in cases {
            match (WebhookConfig::from_flags(url, Some(file), timeout), refused) {
                (Ok(config), None) => assert_eq!(config.secret, b"s3cret"),
                (Err(error), Some(words)) => {
                    let text = error.to_string();
                    assert!(
                        text.contains(words) && !text.contains('\n'),
                        "{url}: {text}"
                    )
                }
                (other, _) => panic!("{url}: {:?}", other.map(|_| ())),
            }
        }
        assert!(matches!(
            WebhookConfig::from_flags("http://example.com", None, timeout),
            Err(WebhookConfigError::NoSecret)
        ));
    }

    #[test]
    fn the_signature_is_the_hex_hmac_sha256_of_the_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
