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
    let sent = tokio::task::spawn_blocking(move || {
        let agent = ureq::AgentBuilder::new()
            .timeout(timeout)
            .redirects(0)
            .build();
        agent
            .post(&url)
            .set("Content-Type", "application/json")
            .set("User-Agent", "abode-notifications")
            .set("X-Abode-Signature", &signature)
            .set("X-Abode-Delivery", &id)
            .send_bytes(&body)
    })
    .await
    .map_err(|error| format!("the webhook delivery stopped: {error}"))?;
    match sent {
        Ok(response) if (200..300).contains(&response.status()) => Ok(()),
        Ok(response) => Err(format!("the webhook answered HTTP {}", response.status())),
        Err(ureq::Error::Status(code, _)) => Err(format!("the webhook answered HTTP {code}")),
        Err(ureq::Error::Transport(error)) => Err(one_line(&format!(
            "cannot reach the webhook: {error}"
        ))),
    }
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
    fn the_signature_is_the_hex_hmac_sha256_of_the_body() {
        // RFC 4231, test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
