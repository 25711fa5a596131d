//! Identity's error type: each variant is a kind of answer the API gives,
//! carrying a one-line message for the person who asked. The control plane
//! maps it one to one onto its own.

use abode_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// Too many failed logins for a username or client address: refused
    /// without checking the password until the window ends.
    #[error("{message}")]
    Throttled {
        message: String,
        retry_after_seconds: u64,
    },
    /// Every password hashing thread stayed busy for the whole wait.
    #[error("{message}")]
    Busy {
        message: String,
        retry_after_seconds: u64,
    },
    /// Something the caller cannot fix; the message is for the server log.
    #[error("{0}")]
    Internal(String),
}

impl From<StoreError> for IdentityError {
    /// Storage failures identity did not expect are internal; expected ones
    /// are mapped with a message at the call site.
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(what) => IdentityError::NotFound(format!("{what} not found")),
            StoreError::Conflict(what) => IdentityError::Conflict(format!("{what} already exists")),
            StoreError::BadCursor(error) => IdentityError::BadRequest(error.to_string()),
            other => IdentityError::Internal(other.to_string()),
        }
    }
}

impl From<abode_credentials::CredentialError> for IdentityError {
    fn from(error: abode_credentials::CredentialError) -> Self {
        use abode_credentials::CredentialError;
        match error {
            CredentialError::Busy {
                message,
                retry_after_seconds,
            } => IdentityError::Busy {
                message,
                retry_after_seconds,
            },
            CredentialError::Internal(message) => IdentityError::Internal(message),
        }
    }
}

impl From<abode_authz::Denied> for IdentityError {
    fn from(denied: abode_authz::Denied) -> Self {
        IdentityError::Forbidden(denied.reason)
    }
}

/// Maps a store `NotFound` to a message naming what the user asked for.
pub(crate) fn or_not_found<T>(
    result: Result<T, StoreError>,
    message: impl FnOnce() -> String,
) -> Result<T, IdentityError> {
    match result {
        Ok(value) => Ok(value),
        Err(StoreError::NotFound(_)) => Err(IdentityError::NotFound(message())),
        Err(other) => Err(other.into()),
    }
}
