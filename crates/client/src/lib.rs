//! The client side of Abode's HTTP API (docs/api.md), shared by the CLI and the agent.
//!
//! It keeps three things the binary should not have to know about: how to talk
//! to the server ([`Client`]), where the CLI session lives ([`config`]), and how
//! a template folder is packed for upload ([`archive`]). The request and
//! answer types are the server's own, from `abode-sdk`.
//!
//! The daemons' routes have their own small client in `abode-provisionerd`,
//! over `abode-protocol`. Errors carry the server's one-line message. The
//! session is `session.json` under `ABODE_CONFIG_DIR` (mode 0600), or
//! `ABODE_URL` and `ABODE_TOKEN`; a stored token is only ever sent to the
//! server that issued it. Template packing is a deterministic tar.gz that
//! leaves out `.terraform/`, lock files, state and plan files. `connect.rs`
//! spells the WebSocket URLs of connections; the sockets themselves are the
//! binary's and the agent's, asynchronous.

pub mod archive;
mod client;
pub mod config;
pub mod connect;
mod error;

pub use client::{workspace_segment, Client, UnsavedConsent};

/// The `User-Agent` of every request and WebSocket the CLI and the agent
/// make (the connection log and the audit log name it).
pub const USER_AGENT: &str = concat!("abode/", env!("CARGO_PKG_VERSION"));
pub use error::{ArchiveError, ClientError, ConfigError};
