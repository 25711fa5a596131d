//! The errors the client hands to the CLI and the agent.
//!
//! Every variant renders as one line a user can act on: the server's own
//! message for API refusals, the address and the cause when the server cannot be
//! reached. Tokens and passwords never appear in them.

use std::path::PathBuf;

/// Why a call to the Abode server did not give the expected answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error status; `message` is its one-line reason.
    #[error("{message}")]
    Api {
        status: u16,
        code: String,
        message: String,
    },
    /// Nothing answered at the address, or the connection broke.
    #[error("cannot reach the Abode server at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The server's TLS certificate was refused: which, why and how to pass
    /// its CA, in one line (`abode_tls::explain`). Not transient: the same
    /// certificate is refused again.
    #[error("{0}")]
    Certificate(String),
    /// The server answered with something that is not the documented JSON.
    #[error("unexpected answer from the Abode server for {what}: {reason}")]
    BadResponse { what: String, reason: String },
    /// A command needs a session and none is configured.
    #[error(
        "not logged in: run `abode login URL --username U --password-stdin`, or set ABODE_URL and ABODE_TOKEN"
    )]
    NotLoggedIn,
}

impl ClientError {
    /// The server's error code (`not_found`, `conflict`, ...), if the server answered.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The HTTP status of a server refusal.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True when retrying later may succeed (the server is down or restarting).
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Unreachable { .. } => true,
            ClientError::Api { status, .. } => *status >= 500,
            _ => false,
        }
    }
}

/// Why the session config could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the Abode config {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the Abode config {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the Abode config {path} is not valid JSON ({reason}); log in again to rewrite it")]
    Invalid { path: PathBuf, reason: String },
    #[error("cannot find a config directory: set ABODE_CONFIG_DIR, XDG_CONFIG_HOME or HOME")]
    NoConfigDir,
}

/// Why a template folder could not be packed.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("template directory {path} does not exist or is not a directory")]
    NotADirectory { path: PathBuf },
    #[error("cannot read {path} while packing the template: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("template directory {path} holds no .tf file")]
    NoTerraformFiles { path: PathBuf },
}
