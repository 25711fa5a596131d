//! The tunnel between the server and a workspace's agent.
//!
//! The agent keeps one long-lived connection to the server (a WebSocket on
//! the access URL, authenticated with its agent token); over it, the server
//! opens one stream per user connection (an SSH session, a forwarded TCP
//! connection, a web terminal). This crate is that multiplexing, independent of the
//! transport: it reads and writes whole messages through channels, so the
//! server (axum's WebSocket) and the agent (a WebSocket client) each glue
//! their own socket to it, and it is tested without any socket at all.
//!
//! Each stream has its own credit-based flow control (`frame::WINDOW` bytes
//! in flight at most), so a slow reader on one stream never holds up the
//! others nor makes the other side buffer without bound.

pub mod dial_back;
pub mod frame;
pub mod messages;
pub mod mux;
pub mod request;
pub mod terminal;

pub use dial_back::{BoxedStream, ByteStream};
pub use messages::{MessageIo, MessageReceiver, MessageSender};
pub use mux::{Incoming, Mux, MuxError, Side};
pub use request::{StreamKind, StreamRequest};
pub use terminal::{TerminalDecoder, TerminalInput, TerminalOpen};

/// The WebSocket close code of an agent's tunnel that a newer connection
/// with the same agent token replaced (the private-use range of RFC 6455).
pub const CLOSE_REPLACED: u16 = 4001;
/// The WebSocket close code of an agent's tunnel whose agent is no longer
/// one of its workspace's agents.
pub const CLOSE_GONE: u16 = 4002;
