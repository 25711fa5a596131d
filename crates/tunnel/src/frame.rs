//! The frames of the protocol, one per transport message:
//! `[kind: u8][stream id: u32, big-endian][payload]`.

/// Bytes a side may send on a stream before the other grants more. A
/// stream crosses several hops (person, server, agent, SSH server), each
/// scheduled on a shared machine: the window must cover the bytes in flight
/// across all of them, or the sender waits for credit while every hop idles
/// (256 KiB held the throughput of a copy to about half of OpenSSH's).
pub const WINDOW: u32 = 1024 * 1024;
/// The largest data payload of one frame: two SSH packets of OpenSSH's
/// 32 KiB with their framing, so one packet is never cut across two frames.
pub const MAX_DATA: usize = 64 * 1024;
/// The largest data payload, and the window, of a peer from before frames
/// of [`MAX_DATA`] (it does not send [`MAX_DATA_HEADER`]): it refuses larger
/// frames, and credit past its window.
pub const LEGACY_MAX_DATA: usize = 32 * 1024;
pub const LEGACY_WINDOW: u32 = 256 * 1024;
/// The HTTP header (on the agent's connect request, and on the server's
/// `101` answer) in which each side says the largest data payload it
/// accepts, and so that it speaks this version's window. A side that does
/// not say it is a [`PeerLimits::LEGACY`] one, so that mixed versions keep
/// working during an upgrade.
pub const MAX_DATA_HEADER: &str = "x-abode-tunnel-max-data";

/// What the other side of a connection takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerLimits {
    /// The largest data payload of a frame sent to it.
    pub max_data: usize,
    /// The credit of a stream before it grants more (and the most it will
    /// ever have granted).
    pub window: u32,
}

impl PeerLimits {
    pub const CURRENT: PeerLimits = PeerLimits {
        max_data: MAX_DATA,
        window: WINDOW,
    };
    pub const LEGACY: PeerLimits = PeerLimits {
        max_data: LEGACY_MAX_DATA,
        window: LEGACY_WINDOW,
    };

    /// The peer's limits from its [`MAX_DATA_HEADER`] value: legacy when it
    /// said nothing (or nonsense), never frames above [`MAX_DATA`].
    pub fn from_header(value: Option<&str>) -> PeerLimits {
        match value
            .and_then(|value| value.trim().parse::<usize>().ok())
            .filter(|limit| *limit > 0)
        {
            Some(limit) => PeerLimits {
                max_data: limit.min(MAX_DATA),
                window: WINDOW,
            },
            None => PeerLimits::LEGACY,
        }
    }

    /// Consumed bytes are granted back to the peer once this many add up: a
    /// quarter of its window, which with its largest frame stays within the
    /// window, so the peer never waits forever on credit held back.
    pub fn grant_batch(self) -> u32 {
        self.window / 4
    }
}

const _: () = assert!(WINDOW / 4 + MAX_DATA as u32 <= WINDOW);
const _: () = assert!(LEGACY_WINDOW / 4 + LEGACY_MAX_DATA as u32 <= LEGACY_WINDOW);

/// The size of a frame's header (kind and stream id).
pub const HEADER: usize = 5;

const OPEN: u8 = 1;
const DATA: u8 = 2;
const EOF: u8 = 3;
const RESET: u8 = 4;
const GRANT: u8 = 5;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A new stream; the payload says what it is for (a JSON
    /// [`crate::StreamRequest`] between server and agent).
    Open {
        id: u32,
        header: Vec<u8>,
    },
    Data {
        id: u32,
        bytes: Vec<u8>,
    },
    /// The sender will send no more on this stream (it may still read).
    Eof {
        id: u32,
    },
    /// The stream is gone: neither side sends on it any more.
    Reset {
        id: u32,
    },
    /// The receiver consumed `credit` bytes: the sender may send that much more.
    Grant {
        id: u32,
        credit: u32,
    },
}

/// A message that is not a frame of this protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed tunnel frame: {0}")]
pub struct BadFrame(pub &'static str);

impl Frame {
    pub fn id(&self) -> u32 {
        match self {
            Frame::Open { id, .. }
            | Frame::Data { id, .. }
            | Frame::Eof { id }
            | Frame::Reset { id }
            | Frame::Grant { id, .. } => *id,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let (kind, payload): (u8, &[u8]) = match self {
            Frame::Open { header, .. } => (OPEN, header),
            Frame::Data { bytes, .. } => (DATA, bytes),
            Frame::Eof { .. } => (EOF, &[]),
            Frame::Reset { .. } => (RESET, &[]),
            Frame::Grant { credit, .. } => {
                let mut out = header(GRANT, self.id(), 4);
                out.extend_from_slice(&credit.to_be_bytes());
                return out;
            }
        };
        let mut out = header(kind, self.id(), payload.len());
        out.extend_from_slice(payload);
        out
    }

    /// The message of a data frame, straight from the bytes (one copy,
    /// where `Frame::Data { .. }.encode()` would take two).
    pub fn data_message(id: u32, bytes: &[u8]) -> Vec<u8> {
        let mut out = header(DATA, id, bytes.len());
        out.extend_from_slice(bytes);
        out
    }

    /// The header of a data frame of stream `id`, with room after it for a
    /// payload of `payload` bytes, which the caller appends.
    pub fn data_header(id: u32, payload: usize) -> Vec<u8> {
        header(DATA, id, payload)
    }

    /// Takes the message apart; a payload keeps the message's own buffer.
    pub fn decode(message: Vec<u8>) -> Result<Frame, BadFrame> {
        let (&kind, rest) = message.split_first().ok_or(BadFrame("empty"))?;
        if rest.len() < 4 {
            return Err(BadFrame("too short for a stream id"));
        }
        let id = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let payload_len = rest.len() - 4;
        let payload = |mut message: Vec<u8>| {
            message.drain(..HEADER);
            message
        };
        match kind {
            OPEN => Ok(Frame::Open {
                id,
                header: payload(message),
            }),
            DATA if payload_len > MAX_DATA => Err(BadFrame("data frame over the size limit")),
            DATA => Ok(Frame::Data {
                id,
                bytes: payload(message),
            }),
            EOF if payload_len == 0 => Ok(Frame::Eof { id }),
            RESET if payload_len == 0 => Ok(Frame::Reset { id }),
            GRANT => match &message[HEADER..] {
                [a, b, c, d] => Ok(Frame::Grant {
                    id,
                    credit: u32::from_be_bytes([*a, *b, *c, *d]),
                }),
                _ => Err(BadFrame("a grant carries exactly four bytes")),
            },
            EOF | RESET => Err(BadFrame("unexpected payload")),
            _ => Err(BadFrame("unknown kind")),
        }
    }
}

fn header(kind: u8, id: u32, payload: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload);
    out.push(kind);
    out.extend_from_slice(&id.to_be_bytes());
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let frames = [
            Frame::Open {
                id: 2,
                header: b"{\"kind\":\"ssh\"}".to_vec(),
            },
            Frame::Data {
                id: u32::MAX,
                bytes: vec![0, 1, 2, 255],
            },
            Frame::Data {
                id: 7,
                bytes: vec![],
            },
            Frame::Eof { id: 9 },
            Frame::Reset { id: 10 },
            Frame::Grant {
                id: 11,
                credit: WINDOW,
            },
        ];
        for frame in frames {
            if let Frame::Data { id, bytes } = &frame {
                assert_eq!(Frame::data_message(*id, bytes), frame.encode());
            }
            assert_eq!(Frame::decode(frame.encode()).unwrap(), frame);
        }
    }

    #[test]
    fn a_peer_gets_the_frames_and_window_it_said_it_takes() {
        let current = |max_data| PeerLimits {
            max_data,
            window: WINDOW,
        };
        let cases = [
            (None, PeerLimits::LEGACY),
            (Some("65536"), PeerLimits::CURRENT),
            (Some(" 1000 "), current(1000)),
            (Some("99999999"), PeerLimits::CURRENT),
            (Some("0"), PeerLimits::LEGACY),
            (Some("lots"), PeerLimits::LEGACY),
        ];
        for (value, expected) in cases {
            assert_eq!(PeerLimits::from_header(value), expected, "{value:?}");
        }
    }

    #[test]
    fn malformed_messages_are_refused() {
        let oversized = {
            let mut data = vec![DATA, 0, 0, 0, 1];
            data.resize(HEADER + MAX_DATA + 1, 0);
            data
        };
        let cases: [(&[u8], &str); 6] = [
            (&[], "empty"),
            (&[DATA, 0, 0], "too short for a stream id"),
            (&[99, 0, 0, 0, 1], "unknown kind"),
            (
                &[GRANT, 0, 0, 0, 1, 0, 0],
                "a grant carries exactly four bytes",
            ),
            (&[EOF, 0, 0, 0, 1, 7], "unexpected payload"),
            (&oversized, "data frame over the size limit"),
        ];
        for (message, expected) in cases {
            assert_eq!(Frame::decode(message.to_vec()), Err(BadFrame(expected)));
        }
    }
}
