//! The web terminal's stream (`pty`, docs/web-terminal.md): a shell on a
//! terminal in the workspace that outlives the connection to it, so that a
//! page reloaded or a network that dropped finds the same shell and the
//! output it missed.
//!
//! Bytes from the person to the agent are messages, because a keystroke
//! and a window's new size travel on the same stream: each is
//! `[kind: u8][length: u16, big-endian][payload]`, kind [`INPUT`] (bytes
//! for the terminal) or [`RESIZE`] (rows then columns, two `u16`s). A
//! browser's WebSocket messages reach the agent as they are, so a page
//! writes these frames itself.
//!
//! Bytes from the agent are the terminal's output as it is, after one
//! header: the `u64` (big-endian) offset in the session's output of the
//! first byte that follows. A session keeps its recent output; a client
//! that says which offset it has seen up to gets what came after it (or,
//! when that is no longer kept, the oldest kept, and the header says so).

use serde::{Deserialize, Serialize};

/// A frame of bytes typed into the terminal.
pub const INPUT: u8 = 0;
/// A frame with the terminal's new size.
pub const RESIZE: u8 = 1;
/// The bytes before a frame's payload.
pub const FRAME_HEADER: usize = 3;
/// The most a frame carries.
pub const MAX_PAYLOAD: usize = u16::MAX as usize;
/// The bytes of the offset that starts the agent's output.
pub const OUTPUT_HEADER: usize = 8;
/// The longest session id.
pub const MAX_SESSION_ID: usize = 64;

/// What a person asks of a `pty` stream, in its header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalOpen {
    /// The session to attach to, created when the agent has none by that
    /// id for this person ([`valid_session_id`]).
    pub session: String,
    /// The terminal's size when a session is created (later sizes are
    /// [`RESIZE`] frames).
    pub rows: u16,
    pub cols: u16,
    /// How much of the session's output the client has already shown.
    #[serde(default)]
    pub offset: u64,
    /// What a new session runs instead of a login shell: the command of the
    /// template's `abode_app` the person opened. Set by the server from the
    /// app's definition, never taken from the person's request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

/// A session id is what a page can make without coordination (a UUID is
/// one) and the agent can log: 1 to 64 ASCII letters, digits and `-`.
pub fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_SESSION_ID
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-')
}

/// One message from the person to the terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalInput {
    Input(Vec<u8>),
    Resize { rows: u16, cols: u16 },
}

/// A frame that breaks the protocol: the stream is ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TerminalError {
    #[error("unknown terminal frame kind {0}")]
    UnknownKind(u8),
    #[error("a resize frame carries 4 bytes, not {0}")]
    BadResize(usize),
}

impl TerminalInput {
    /// The frames of this message: input longer than a frame is split.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            TerminalInput::Input(bytes) => {
                for chunk in bytes.chunks(MAX_PAYLOAD) {
                    push_frame(&mut out, INPUT, chunk);
                }
            }
            TerminalInput::Resize { rows, cols } => {
                let mut payload = [0u8; 4];
                payload[..2].copy_from_slice(&rows.to_be_bytes());
                payload[2..].copy_from_slice(&cols.to_be_bytes());
                push_frame(&mut out, RESIZE, &payload);
            }
        }
        out
    }
}

fn push_frame(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    out.push(kind);
    // The callers never pass more than MAX_PAYLOAD.
    let length = u16::try_from(payload.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&payload[..usize::from(length)]);
}

/// Reads frames out of a byte stream cut anywhere.
#[derive(Debug, Default)]
pub struct TerminalDecoder {
    pending: Vec<u8>,
}

impl TerminalDecoder {
    pub fn push(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
    }

    /// The next whole frame, `None` until one has arrived.
    pub fn next_input(&mut self) -> Result<Option<TerminalInput>, TerminalError> {
        if self.pending.len() < FRAME_HEADER {
            return Ok(None);
        }
        let kind = self.pending[0];
        let length = usize::from(u16::from_be_bytes([self.pending[1], self.pending[2]]));
        if kind != INPUT && kind != RESIZE {
            return Err(TerminalError::UnknownKind(kind));
        }
        if self.pending.len() < FRAME_HEADER + length {
            return Ok(None);
        }
        let payload: Vec<u8> = self
            .pending
            .drain(..FRAME_HEADER + length)
            .skip(FRAME_HEADER)
            .collect();
        if kind == INPUT {
            return Ok(Some(TerminalInput::Input(payload)));
        }
        match payload[..] {
            [r0, r1, c0, c1] => Ok(Some(TerminalInput::Resize {
                rows: u16::from_be_bytes([r0, r1]),
                cols: u16::from_be_bytes([c0, c1]),
            })),
            _ => Err(TerminalError::BadResize(payload.len())),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn decode_all(bytes: &[u8], cut: usize) -> Result<Vec<TerminalInput>, TerminalError> {
        let mut decoder = TerminalDecoder::default();
        let mut out = Vec::new();
        for chunk in bytes.chunks(cut.max(1)) {
            decoder.push(chunk);
            while let Some(input) = decoder.next_input()? {
                out.push(input);
            }
        }
        Ok(out)
    }

    #[test]
    fn frames_survive_any_cut_of_the_stream() {
        let messages = [
            TerminalInput::Input(b"echo $((6*7))\r".to_vec()),
            TerminalInput::Resize {
                rows: 40,
                cols: 132,
            },
            TerminalInput::Input(vec![0xff; 3]),
        ];
        let bytes: Vec<u8> = messages.iter().flat_map(TerminalInput::encode).collect();
        for cut in [1, 2, 3, 5, 7, bytes.len()] {
            assert_eq!(decode_all(&bytes, cut).unwrap(), messages, "cut {cut}");
        }
    }

    #[test]
    fn empty_input_is_no_frame() {
        assert!(TerminalInput::Input(Vec::new()).encode().is_empty());
    }

    #[test]
    fn a_long_paste_is_split_into_frames_and_joined_back() {
        let paste = vec![b'x'; MAX_PAYLOAD * 2 + 10];
        let bytes = TerminalInput::Input(paste.clone()).encode();
        let joined: Vec<u8> = decode_all(&bytes, 4096)
            .unwrap()
            .into_iter()
            .flat_map(|input| match input {
                TerminalInput::Input(bytes) => bytes,
                TerminalInput::Resize { .. } => panic!("a resize"),
            })
            .collect();
        assert_eq!(joined, paste);
    }

    #[test]
    fn broken_frames_are_errors() {
        assert_eq!(
            decode_all(&[7, 0, 0], 3),
            Err(TerminalError::UnknownKind(7))
        );
        assert_eq!(
            decode_all(&[RESIZE, 0, 2, 0, 1], 5),
            Err(TerminalError::BadResize(2))
        );
    }

    #[test]
    fn session_ids() {
        let cases = [
            ("0b7c1f9e-3c57-4a4e-9f0e-6f1d2a3b4c5d", true),
            ("a", true),
            ("", false),
            ("../etc", false),
            ("a b", false),
            (&"x".repeat(65), false),
        ];
        for (id, valid) in cases {
            assert_eq!(valid_session_id(id), valid, "{id:?}");
        }
    }
}
