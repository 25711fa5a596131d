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
//! Every request body and every answer is here: the API declares no body of
//! its own and writes none with `json!`, the client builds none with
//! `json!`, and `ErrorEnvelope` is every refusal's
//! (crates/abode/tests/house.rs checks that no serde type but a query
//! string, a page's form or a listed non-body is declared in the API, the
//! client, the web pages or the CLI). The health checks are `Health` and
//! `Readiness`; a push's answer is `TemplateVersionResponse`, a version's
//! `TemplateVersionDetail` and an activation's `TemplateActivated`;
//! pausing prebuilds answers `PrebuildsPaused`; a retained record carries
//! the build destroying it. A daemon's release and completion are answered
//! with `abode-protocol`'s `ReleaseAnswer` and `CompleteAnswer`.
//!
//! `requests` holds the bodies the client writes and the API reads. The wire's
//! enums are their JSON strings: `Transition` is the contract's own (one type
//! for the wire, the store's column and the `ABODE_*` variable), and so is
//! `BuildStatus` (the contract's vocabulary, named in JSON as in its column). A build's guard
//! report, a workspace's parameters and a version's lint report are a type parameter: clients read JSON
//! values, the server writes the typed values the store decoded. The daemons'
//! protocol is not here (`abode-protocol`).

mod enums;
pub mod requests;
mod wire;

pub use abode_contract::apps;
pub use abode_contract::deprecation;
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
