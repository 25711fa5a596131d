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
//!
//! # The wire
//!
//! A frame is `[kind][stream id][payload]`: open (with a header), data, EOF,
//! reset, grant. Each stream has credit-based flow control (1 MiB in flight,
//! frames of up to 64 KiB, credit granted back in batches of a quarter window);
//! a side that sends past its credit (or more than the one empty data frame a
//! stream may carry, which spends none) loses its connection. The window covers
//! the bytes in flight across every hop of a copy (proxy, server, agent, SSH
//! server), which is what bulk throughput depends on (docs/benchmarks.md).
//! `frame::MAX_DATA_HEADER` is how each side says the largest frame it takes; a
//! peer that does not say is an older version (`PeerLimits::LEGACY`, 32 KiB
//! frames in a 256 KiB window), so mixed versions work. `CLOSE_REPLACED` and
//! `CLOSE_GONE` are the close codes the server ends an agent's tunnel with.
//!
//! `StreamRequest` is the JSON header of a stream: `ssh` with the workspace's
//! host key, `port-forward` with a port, or `pty` with a `TerminalOpen` (the
//! web terminal's session, size and the offset of the output already shown);
//! `terminal.rs` is the `pty` stream's own protocol (the person's input and
//! resize frames, the offset that starts the agent's output,
//! docs/web-terminal.md).
//!
//! # Streams
//!
//! `Mux::open_messages` is a stream as whole messages, for the server's relay;
//! `MessageIo` reads and writes such a stream as bytes (an HTTP client's stream
//! to an app) without the byte pipe and tasks of `Mux::open`. A stream the
//! other side opens (`Incoming`) is taken as a byte pipe (`into_stream`) or as
//! messages (`into_messages`: the agent's port forwards, whose
//! `MessageSender::send_read` reads the socket straight into the frame that
//! carries it); one dropped untaken is reset.
//!
//! `dial_back.rs` is the protocol of a stream the agent carries on a connection
//! of its own (an app request's): the ticket in `StreamRequest`, `GET
//! /agent/streams` with the ticket in `x-abode-stream-ticket` and `Upgrade:
//! abode-stream`, the header each side says it takes part with, and
//! `MessageSender::stay_on_tunnel`, the empty frame by which an agent that
//! could not dial back says the stream stays on the tunnel. `BoxedStream` is
//! either kind of stream.
//!
//! Tested with channels only (`tests/mux.rs`).

pub mod dial_back;
pub mod frame;
pub mod messages;
pub mod mux;
pub mod request;
mod shared;
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
