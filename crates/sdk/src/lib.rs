//! The wire of Abode's HTTP API (docs/api.md): its request and answer types.
//! The server (`abode-api`) builds these from its records and serializes
//! them; the client (`abode-client`), the CLI, the dashboard and the tests
//! deserialize into the same types, so the two sides cannot drift apart.
//! Coder's `codersdk` is the model.
//!
//! Fields a newer server may add are ignored, and fields a client can live
//! without default, so a newer server does not break an older CLI. The same
//! types serialise the CLI's `--output json`, which keeps that output a
//! stable, documented subset (docs/cli.md).
//!
//! No I/O and no domain logic here: plain data, its serde shape and the
//! parsing of its enums.
//!
//! Not every body is here yet: the API still declares some request bodies of
//! its own (`NewBuildBody`, `NewWorkspaceBody`, `PreviewBody`, `DestroyBody`),
//! a few answers that mirror types of this crate (`ProvisionerJson`,
//! `CurrentJob`, `PreviewResultJson`, `CreatedKey`) and its error envelope,
//! which the client reads as its own `ErrorBody`; issue 45 moves them here.
//!
//! `requests` holds the bodies the client writes and the API reads. The wire's
//! enums are their JSON strings: `Transition` is the contract's own (one type
//! for the wire, the store's column and the `ABODE_*` variable), and so is
//! `BuildStatus` (the contract's vocabulary, named in JSON as in its column). A build's guard
//! report and a workspace's parameters are a type parameter: clients read JSON
//! values, the server writes the typed values the store decoded. The daemons'
//! protocol is not here (`abode-protocol`).

mod enums;
pub mod requests;
mod wire;

pub use abode_contract::apps;
pub use enums::{BuildStatus, Transition, UnknownBuildStatus, UnknownValue, VersionChoice};
pub use wire::*;

/// Percent-encodes a path segment or a query value of the API's URLs
/// (everything but RFC 3986's unreserved characters): a workspace's
/// `owner/name` as one segment, a relayed query, an app's return path.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
