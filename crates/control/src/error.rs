//! The control plane's one error type: each variant is a kind of answer the
//! API gives (its HTTP status and error code), carrying a one-line message
//! meant for the person who made the request.

use abode_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    InvalidArchive(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// A build's plan was judged already and another was sent: the first
    /// verdict stands (a conflict, with a code of its own).
    #[error("{0}")]
    AlreadyJudged(String),
    #[error("{0}")]
    InvalidTemplate(String),
    /// Refused by quota before anything was built: the create's estimated
    /// cost already does not fit the owner's budget (`--quota-enforce`).
    #[error("{0}")]
    QuotaExceeded(String),
    /// A create, start or claim whose template requires an external auth
    /// provider the owner has not linked: refused before any plan, with
    /// where to link it.
    #[error("{0}")]
    ExternalAuthRequired(String),
    /// A delete held because the workspace's last report shows unsaved
    /// work the request did not discard or confirm (issue 47).
    #[error("{0}")]
    UnsavedWork(String),
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

impl ControlError {
    /// The API's error code for this kind of failure (see docs/api.md).
    pub fn code(&self) -> &'static str {
        match self {
            ControlError::BadRequest(_) => "bad_request",
            ControlError::InvalidArchive(_) => "invalid_archive",
            ControlError::Unauthorized(_) => "unauthorized",
            ControlError::Forbidden(_) => "forbidden",
            ControlError::NotFound(_) => "not_found",
            ControlError::Conflict(_) => "conflict",
            ControlError::AlreadyJudged(_) => "already_judged",
            ControlError::InvalidTemplate(_) => "invalid_template",
            ControlError::QuotaExceeded(_) => "quota_exceeded",
            ControlError::ExternalAuthRequired(_) => "external_auth_required",
            ControlError::UnsavedWork(_) => "unsaved_work",
            ControlError::Throttled { .. } => "too_many_requests",
            ControlError::Busy { .. } => "unavailable",
            ControlError::Internal(_) => "internal",
        }
    }

    /// Seconds the client should wait before trying again, for the answers
    /// that have one (`Retry-After`).
    pub fn retry_after_seconds(&self) -> Option<u64> {
        match self {
            ControlError::Throttled {
                retry_after_seconds,
                ..
            }
            | ControlError::Busy {
                retry_after_seconds,
                ..
            } => Some(*retry_after_seconds),
            _ => None,
        }
    }
}

impl From<StoreError> for ControlError {
    /// Storage failures the domain did not expect are internal; expected ones
    /// (a missing workspace) are mapped with a message at the call site.
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NotFound(what) => ControlError::NotFound(format!("{what} not found")),
            StoreError::Conflict(what) => ControlError::Conflict(format!("{what} already exists")),
            StoreError::BadCursor(error) => ControlError::BadRequest(error.to_string()),
            other => ControlError::Internal(other.to_string()),
        }
    }
}

/// Maps a store `NotFound` to a message naming what the user asked for.
pub(crate) fn or_not_found<T>(
    result: Result<T, StoreError>,
    message: impl FnOnce() -> String,
) -> Result<T, ControlError> {
    match result {
        Ok(value) => Ok(value),
        Err(StoreError::NotFound(_)) => Err(ControlError::NotFound(message())),
        Err(other) => Err(other.into()),
    }
}

impl From<abode_runner::archive::InvalidArchive> for ControlError {
    fn from(error: abode_runner::archive::InvalidArchive) -> Self {
        ControlError::InvalidArchive(error.0)
    }
}

impl From<abode_parameters::ImportError> for ControlError {
    fn from(error: abode_parameters::ImportError) -> Self {
        use abode_parameters::ImportError;
        match error {
            ImportError::Template { .. } | ImportError::Declarations(_) => {
                ControlError::InvalidTemplate(error.to_string())
            }
            ImportError::Run(error) => ControlError::Internal(error.to_string()),
        }
    }
}

impl From<abode_parameters::presets::PresetError> for ControlError {
    fn from(error: abode_parameters::presets::PresetError) -> Self {
        use abode_parameters::presets::PresetError;
        match error {
            PresetError::Refused(message) => ControlError::BadRequest(message),
            PresetError::Unreadable(message) => ControlError::Internal(message),
        }
    }
}

impl From<abode_identity::IdentityError> for ControlError {
    fn from(error: abode_identity::IdentityError) -> Self {
        use abode_identity::IdentityError;
        match error {
            IdentityError::BadRequest(message) => ControlError::BadRequest(message),
            IdentityError::Unauthorized(message) => ControlError::Unauthorized(message),
            IdentityError::Forbidden(message) => ControlError::Forbidden(message),
            IdentityError::NotFound(message) => ControlError::NotFound(message),
            IdentityError::Conflict(message) => ControlError::Conflict(message),
            IdentityError::Throttled {
                message,
                retry_after_seconds,
            } => ControlError::Throttled {
                message,
                retry_after_seconds,
            },
            IdentityError::Busy {
                message,
                retry_after_seconds,
            } => ControlError::Busy {
                message,
                retry_after_seconds,
            },
            IdentityError::Internal(message) => ControlError::Internal(message),
        }
    }
}

impl From<crate::authz::Denied> for ControlError {
    fn from(denied: crate::authz::Denied) -> Self {
        ControlError::Forbidden(denied.reason)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::authz::{authorize, Action, Role, Roles, Subject};

    #[test]
    fn a_refusal_is_a_forbidden_answer() {
        let denied = authorize(
            &Subject::user("m", Roles::from([Role::Member])),
            Action::UserList,
            None,
        )
        .unwrap_err();
        assert!(matches!(
            ControlError::from(denied),
            ControlError::Forbidden(message) if message.starts_with("you may not list users")
        ));
    }
}
