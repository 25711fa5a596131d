//! Credentials: passwords hashed with argon2 on a bounded pool of threads,
//! and tokens (sessions, API tokens, provisioner keys) made at random and
//! kept only as their SHA-256. Small modules the identity rules of the
//! control plane call; they know no user, no store and no policy.
//!
//! `hashing.rs` is the bounded pool that runs argon2: a fixed few threads (one
//! per core, at most 4), each reusing one 19 MiB working memory, so the
//! server's memory for passwords is threads x 19 MiB whatever arrives (200
//! parallel failed logins: +43 MB peak RSS, `e2e_sessions`; they once took 6
//! GB). A request that waits too long for a thread is refused as busy (503).
//! `secrets.rs` makes tokens (sessions, API tokens, provisioner keys) at random
//! and keeps only their SHA-256, and hashes and checks passwords on the pool's
//! threads; a login for an unknown user is checked against a dummy hash of the
//! same parameters, so timing does not tell which users exist.

pub mod hashing;
pub mod secrets;

/// Why a credential could not be made or checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// No hashing thread was free in time: try again in a moment.
    #[error("{message}")]
    Busy {
        message: String,
        retry_after_seconds: u64,
    },
    /// Something the caller cannot fix; the message is for the server log.
    #[error("{0}")]
    Internal(String),
}
