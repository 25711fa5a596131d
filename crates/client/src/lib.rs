//! The client side of Abode's HTTP API (docs/api.md), shared by the CLI and the agent.
//!
//! It keeps three things the binary should not have to know about: how to talk
//! to the server ([`Client`]), where the CLI session lives ([`config`]), and how
//! a template folder is packed for upload ([`archive`]). The request and
//! answer types are the server's own, from `abode-sdk`.

pub mod archive;
mod client;
pub mod config;
pub mod connect;
mod error;

pub use client::{workspace_segment, Client};
pub use error::{ArchiveError, ClientError, ConfigError};
