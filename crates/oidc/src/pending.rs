//! The state a sign-in keeps between sending the browser to the provider
//! and its coming back, and the CLI's one-time codes.
//!
//! A pending sign-in is found by its `state` (random, in the provider's
//! redirect), holds the nonce the ID token must carry and the PKCE
//! verifier of the code exchange, and is taken exactly once: a replayed
//! callback finds nothing. It lives on the server (the database, through
//! [`PendingStore`], so that the callback may reach any server of a
//! deployment), keyed by the SHA-256 of the state, for ten minutes at most.
//!
//! A CLI sign-in ends with a one-time code instead of a cookie: the CLI
//! trades it for a session over the API. It is stored the same way, keyed
//! by its own hash, taken once, for five minutes at most.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How long a sign-in may take at the provider.
pub const LOGIN_TTL: Duration = Duration::from_secs(10 * 60);
/// How long a CLI's one-time code lasts.
pub const CODE_TTL: Duration = Duration::from_secs(5 * 60);

/// Where the person goes once signed in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReturnTo {
    /// The dashboard, at a local path (checked by [`local_path`]).
    Dashboard { path: String },
    /// The CLI's loopback listener: `http://127.0.0.1:PORT/callback?code=`.
    CliLoopback { host: String, port: u16 },
    /// The CLI that waits for the person to paste a code shown on a page.
    CliPaste,
}

/// A sign-in between the redirect to the provider and the callback.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingLogin {
    pub nonce: String,
    pub pkce_verifier: String,
    pub return_to: ReturnTo,
}

impl std::fmt::Debug for PendingLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingLogin")
            .field("return_to", &self.return_to)
            .finish_non_exhaustive()
    }
}

/// A CLI's one-time code: who signed in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct CodeEntry {
    user_id: String,
}

/// What went wrong keeping pending state.
#[derive(Debug, thiserror::Error)]
pub enum PendingError {
    #[error("cannot keep the sign-in's state: {0}")]
    Store(String),
    /// Too many sign-ins are under way (unexpired entries at the cap): a
    /// flood of anonymous starts cannot grow the database without bound.
    #[error("too many sign-ins are under way; try again in a few minutes")]
    Full,
}

/// Where pending entries are kept: a put, and a take that removes the
/// entry in the same step (so two takes of one key cannot both succeed).
/// Keys are hashes; `now` and `expires_at` are milliseconds.
pub trait PendingStore: Send + Sync {
    fn put(
        &self,
        key: String,
        payload: String,
        expires_at: i64,
        now: i64,
    ) -> impl Future<Output = Result<(), PendingError>> + Send;
    /// The payload of `key` if it was there and had not expired; either
    /// way it is gone afterwards.
    fn take(
        &self,
        key: String,
        now: i64,
    ) -> impl Future<Output = Result<Option<String>, PendingError>> + Send;
}

/// Pending sign-ins and codes over a [`PendingStore`].
pub struct Pending<S> {
    store: S,
}

fn key(kind: &str, secret: &str) -> String {
    hex::encode(Sha256::digest(format!("{kind}:{secret}").as_bytes()))
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// 32 random bytes, hex: states, nonces and codes.
pub fn random_secret() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

impl<S: PendingStore> Pending<S> {
    pub fn new(store: S) -> Pending<S> {
        Pending { store }
    }

    /// Keeps `login` under `state` until [`LOGIN_TTL`] from `now`.
    pub async fn remember(
        &self,
        state: &str,
        login: &PendingLogin,
        now: i64,
    ) -> Result<(), PendingError> {
        let payload =
            serde_json::to_string(login).map_err(|error| PendingError::Store(error.to_string()))?;
        self.store
            .put(
                key("state", state),
                payload,
                now.saturating_add(millis(LOGIN_TTL)),
                now,
            )
            .await
    }

    /// The sign-in of `state`, once; `None` if unknown, used or expired.
    pub async fn take(&self, state: &str, now: i64) -> Result<Option<PendingLogin>, PendingError> {
        let Some(payload) = self.store.take(key("state", state), now).await? else {
            return Ok(None);
        };
        Ok(serde_json::from_str(&payload).ok())
    }

    /// A new one-time code standing for `user_id`, good for [`CODE_TTL`].
    pub async fn issue_code(&self, user_id: &str, now: i64) -> Result<String, PendingError> {
        let code = random_secret();
        let payload = serde_json::to_string(&CodeEntry {
            user_id: user_id.to_string(),
        })
        .map_err(|error| PendingError::Store(error.to_string()))?;
        self.store
            .put(
                key("code", &code),
                payload,
                now.saturating_add(millis(CODE_TTL)),
                now,
            )
            .await?;
        Ok(code)
    }

    /// The user a one-time code stands for, once; `None` if unknown, used
    /// or expired.
    pub async fn redeem_code(&self, code: &str, now: i64) -> Result<Option<String>, PendingError> {
        let Some(payload) = self.store.take(key("code", code.trim()), now).await? else {
            return Ok(None);
        };
        Ok(serde_json::from_str::<CodeEntry>(&payload)
            .ok()
            .map(|entry| entry.user_id))
    }
}

/// A [`PendingStore`] in this process's memory (tests; a single server).
#[derive(Default)]
pub struct MemoryPending {
    entries: Mutex<std::collections::HashMap<String, (String, i64)>>,
}

impl PendingStore for MemoryPending {
    async fn put(
        &self,
        key: String,
        payload: String,
        expires_at: i64,
        now: i64,
    ) -> Result<(), PendingError> {
        let mut entries = self
            .entries
            .lock()
            .map_err(|_| PendingError::Store("poisoned".into()))?;
        entries.retain(|_, (_, expires)| *expires > now);
        entries.insert(key, (payload, expires_at));
        Ok(())
    }

    async fn take(&self, key: String, now: i64) -> Result<Option<String>, PendingError> {
        let mut entries = self
            .entries
            .lock()
            .map_err(|_| PendingError::Store("poisoned".into()))?;
        Ok(entries
            .remove(&key)
            .filter(|(_, expires)| *expires > now)
            .map(|(payload, _)| payload))
    }
}

/// `path` if it is a path of this server (`/...`, not `//host` or
/// `/\host`, which browsers take for another site), else `/workspaces`.
pub fn local_path(path: Option<&str>) -> String {
    match path {
        Some(path)
            if path.starts_with('/')
                && !path.starts_with("//")
                && !path.starts_with("/\\")
                && !path.chars().any(|c| c.is_control() || c == '\\')
                && path.len() <= 2048 =>
        {
            path.to_string()
        }
        _ => "/workspaces".to_string(),
    }
}

/// Whether `host` is a loopback name a CLI may listen on.
pub fn loopback_host(host: &str) -> bool {
    matches!(host, "127.0.0.1" | "localhost" | "[::1]" | "::1")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn login() -> PendingLogin {
        PendingLogin {
            nonce: "n".into(),
            pkce_verifier: "v".into(),
            return_to: ReturnTo::Dashboard {
                path: "/workspaces".into(),
            },
        }
    }

    #[tokio::test]
    async fn a_state_is_taken_once_and_expires() {
        let pending = Pending::new(MemoryPending::default());
        pending.remember("s1", &login(), 1_000).await.unwrap();
        assert_eq!(pending.take("s1", 2_000).await.unwrap(), Some(login()));
        assert_eq!(pending.take("s1", 2_000).await.unwrap(), None, "replayed");
        pending.remember("s2", &login(), 1_000).await.unwrap();
        let late = 1_000 + millis(LOGIN_TTL);
        assert_eq!(pending.take("s2", late).await.unwrap(), None, "expired");
        assert_eq!(pending.take("never", 0).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_code_is_redeemed_once_and_expires() {
        let pending = Pending::new(MemoryPending::default());
        let code = pending.issue_code("u1", 0).await.unwrap();
        assert_eq!(code.len(), 64);
        assert_eq!(
            pending.redeem_code(&code, 1).await.unwrap(),
            Some("u1".into())
        );
        assert_eq!(pending.redeem_code(&code, 1).await.unwrap(), None);
        let code = pending.issue_code("u1", 0).await.unwrap();
        assert_eq!(
            pending.redeem_code(&code, millis(CODE_TTL)).await.unwrap(),
            None
        );
        // A state is not a code, nor the other way round.
        pending.remember(&code, &login(), 0).await.unwrap();
        assert_eq!(pending.redeem_code(&code, 1).await.unwrap(), None);
    }

    #[test]
    fn only_local_paths_are_redirect_targets() {
        for (given, expected) in [
            (Some("/workspaces/ann/dev"), "/workspaces/ann/dev"),
            (Some("/templates?x=1"), "/templates?x=1"),
            (Some("//evil.example.com/"), "/workspaces"),
            (Some("/\\evil.example.com"), "/workspaces"),
            (Some("https://evil.example.com/"), "/workspaces"),
            (Some("/a\nb"), "/workspaces"),
            (None, "/workspaces"),
        ] {
            assert_eq!(local_path(given), expected, "{given:?}");
        }
    }
}
