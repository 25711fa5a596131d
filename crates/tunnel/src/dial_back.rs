//! A stream's own connection, dialed back by the agent.
//!
//! A bulk copy through the tunnel (an app's download) pays for every byte
//! at each end: WebSocket framing and masking on the agent, unmasking and
//! frame bookkeeping on the server, and a hand-over between tasks on both.
//! On a two-core machine that held an app's download through the server to
//! about 0.4x of the port on loopback. So for a stream of plain bytes the
//! server may ask the agent to dial back: the stream's header carries a
//! one-time ticket ([`crate::StreamRequest::dial_back`]), and the agent,
//! once it reached the port, opens a connection of its own to the server
//! (`GET` [`STREAMS_PATH`], its agent token, the ticket in
//! [`TICKET_HEADER`], `Upgrade:` [`UPGRADE_PROTOCOL`]) that carries the
//! stream's bytes with nothing between. The ticket is a header, never the
//! path: request logs (the server's, a proxy's) keep paths.
//!
//! A dial-back is an optimisation, never a requirement: anything that stops
//! one (a proxy that refuses the upgrade, a load balancer that sends it to
//! another server, a server that forgot the ticket) leaves the stream on the
//! tunnel. The agent then says so with one empty data frame on the stream
//! ([`crate::MessageSender::stay_on_tunnel`]) and carries it there. Each
//! side says at the tunnel's handshake that it takes part
//! ([`DIAL_BACK_HEADER`]); a server only asks an agent that said so, so
//! mixed versions keep working during an upgrade.

/// The HTTP header (the agent's connect request, the server's `101`) by
/// which a side says it speaks dial-backs.
pub const DIAL_BACK_HEADER: &str = "x-abode-tunnel-dial-back";

/// The `Upgrade` token of a dialed-back connection: after the `101`, the
/// connection is the stream's bytes, both ways, each way ended by a
/// half-close.
pub const UPGRADE_PROTOCOL: &str = "abode-stream";

/// The path (under the server's access URL) an agent dials back to.
pub const STREAMS_PATH: &str = "/api/v1/agent/streams";

/// The header of a dial-back that carries the stream's ticket.
pub const TICKET_HEADER: &str = "x-abode-stream-ticket";

/// Whether `text` has the shape of a ticket (64 lowercase hex digits): what
/// a side checks before it puts one in a request or looks one up.
pub fn is_ticket(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A connection that carries a stream's bytes: a dialed-back one (the
/// server's upgraded HTTP connection) or the tunnel's stream itself.
pub trait ByteStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}

impl<T> ByteStream for T where T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}

/// A [`ByteStream`] of either kind, for a user that takes both.
pub type BoxedStream = Box<dyn ByteStream>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_64_lowercase_hex_digits_are_a_ticket() {
        let cases = [
            ("0".repeat(64), true),
            ("af".repeat(32), true),
            ("0".repeat(63), false),
            ("0".repeat(65), false),
            ("AF".repeat(32), false),
            (format!("{}\r\nx: y", "0".repeat(58)), false),
            (String::new(), false),
        ];
        for (text, expected) in cases {
            assert_eq!(is_ticket(&text), expected, "{text:?}");
        }
    }
}
