//! What the streams of one connection share, in a module that names no
//! sibling: the stream table, the other side's limits, the way out, and the
//! connection's error. The multiplexer (`mux.rs`) builds it and runs the
//! connection over it; a stream taken as whole messages (`messages.rs`) sends
//! and ends through it, without calling back into the multiplexer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, Semaphore};

use crate::frame::{BadFrame, Frame, PeerLimits};

#[derive(Debug, thiserror::Error)]
pub enum MuxError {
    #[error("the tunnel is closed")]
    Closed,
    #[error(transparent)]
    BadFrame(#[from] BadFrame),
    #[error("the other side reused stream id {0}")]
    DuplicateStream(u32),
    /// The other side sent more than it was granted, or granted more than
    /// a window: it does not follow the protocol (or means harm), and its
    /// connection ends rather than this side's memory.
    #[error("the other side broke the flow control of stream {0}")]
    FlowControl(u32),
}

pub(crate) struct Entry {
    /// What arrives for the stream; `None` once the other side sent EOF.
    pub(crate) inbound: Option<mpsc::UnboundedSender<Vec<u8>>>,
    /// Bytes received and not yet granted back: never more than
    /// [`WINDOW`](crate::frame::WINDOW).
    pub(crate) unacknowledged: Arc<AtomicU32>,
    /// The credit the other side granted us for sending.
    pub(crate) credit: Arc<Semaphore>,
    /// The other side sent its one empty data frame.
    pub(crate) sent_empty: bool,
}

pub(crate) struct Shared {
    streams: Mutex<HashMap<u32, Entry>>,
    /// The id of the next stream this side opens.
    pub(crate) next_id: AtomicU32,
    /// What the other side takes (frames, window).
    pub(crate) peer: PeerLimits,
    /// The other side said it dials back ([`crate::dial_back`]).
    pub(crate) peer_dials_back: AtomicBool,
    pub(crate) outgoing: mpsc::Sender<Vec<u8>>,
}

impl Shared {
    /// A connection with no stream yet, whose own streams' ids start at
    /// `first_id`.
    pub(crate) fn new(first_id: u32, peer: PeerLimits, outgoing: mpsc::Sender<Vec<u8>>) -> Shared {
        Shared {
            streams: Mutex::new(HashMap::new()),
            next_id: AtomicU32::new(first_id),
            peer,
            peer_dials_back: AtomicBool::new(false),
            outgoing,
        }
    }

    pub(crate) fn streams(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Entry>> {
        // A panic while holding the map leaves it usable: every change to it
        // is a single insert or remove.
        self.streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) async fn send(&self, frame: Frame) -> Result<(), MuxError> {
        self.outgoing
            .send(frame.encode())
            .await
            .map_err(|_| MuxError::Closed)
    }
}

/// What a stream's own end holds: what arrives, the count of bytes
/// received and not granted back, and the credit to send with.
pub(crate) struct Registered {
    pub(crate) arriving: mpsc::UnboundedReceiver<Vec<u8>>,
    pub(crate) unacknowledged: Arc<AtomicU32>,
    pub(crate) credit: Arc<Semaphore>,
}

/// Records stream `id`.
pub(crate) fn register_entry(shared: &Shared, id: u32) -> Registered {
    let (inbound, arriving) = mpsc::unbounded_channel();
    let credit = Arc::new(Semaphore::new(shared.peer.window as usize));
    let unacknowledged = Arc::new(AtomicU32::new(0));
    shared.streams().insert(
        id,
        Entry {
            inbound: Some(inbound),
            unacknowledged: Arc::clone(&unacknowledged),
            credit: Arc::clone(&credit),
            sent_empty: false,
        },
    );
    Registered {
        arriving,
        unacknowledged,
        credit,
    }
}
