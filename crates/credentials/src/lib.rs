//! Credentials: passwords hashed with argon2 on a bounded pool of threads,
//! and tokens (sessions, API tokens, provisioner keys) made at random and
//! kept only as their SHA-256. Small modules the identity rules of the
//! control plane call; they know no user, no store and no policy.

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
