//! The frames of the protocol, one per transport message:
//! `[kind: u8][stream id: u32, big-endian][payload]`.

/// Bytes a side may send on a stream before the other grants more.
pub const WINDOW: u32 = 256 * 1024;
/// The largest data payload of one frame.
pub const MAX_DATA: usize = 32 * 1024;

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

    pub fn decode(message: &[u8]) -> Result<Frame, BadFrame> {
        let (&kind, rest) = message.split_first().ok_or(BadFrame("empty"))?;
        if rest.len() < 4 {
            return Err(BadFrame("too short for a stream id"));
        }
        let (id, payload) = rest.split_at(4);
        let id = u32::from_be_bytes([id[0], id[1], id[2], id[3]]);
        match kind {
            OPEN => Ok(Frame::Open {
                id,
                header: payload.to_vec(),
            }),
            DATA if payload.len() > MAX_DATA => Err(BadFrame("data frame over the size limit")),
            DATA => Ok(Frame::Data {
                id,
                bytes: payload.to_vec(),
            }),
            EOF if payload.is_empty() => Ok(Frame::Eof { id }),
            RESET if payload.is_empty() => Ok(Frame::Reset { id }),
            GRANT => match payload {
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
    let mut out = Vec::with_capacity(5 + payload);
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
            assert_eq!(Frame::decode(&frame.encode()).unwrap(), frame);
        }
    }

    #[test]
    fn malformed_messages_are_refused() {
        let oversized = {
            let mut data = vec![DATA, 0, 0, 0, 1];
            data.resize(5 + MAX_DATA + 1, 0);
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
            assert_eq!(Frame::decode(message), Err(BadFrame(expected)));
        }
    }
}
