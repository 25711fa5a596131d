//! The wire of Abode's HTTP API (docs/api.md): every request and answer type,
//! defined once. The server (`abode-api`) builds these from its records and
//! serializes them; the client (`abode-client`), the CLI, the dashboard and
//! the tests deserialize into the same types, so the two sides cannot drift
//! apart. Coder's `codersdk` is the model.
//!
//! Fields a newer server may add are ignored, and fields a client can live
//! without default, so a newer server does not break an older CLI. The same
//! types serialise the CLI's `--output json`, which keeps that output a
//! stable, documented subset (docs/cli.md).
//!
//! No I/O and no domain logic here: plain data, its serde shape and the
//! parsing of its enums.

mod enums;
pub mod requests;
mod wire;

pub use abode_contract::apps;
pub use enums::{BuildStatus, Transition, UnknownValue};
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
