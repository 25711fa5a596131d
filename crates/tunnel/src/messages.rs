//! A stream as whole messages, for a relay: [`crate::Mux::open_messages`].
//!
//! The server's side of a person's connection is itself messages (its
//! WebSocket): going through a byte pipe and the stream's two tasks would
//! copy every chunk twice more and wake two more tasks per chunk, on the
//! path whose latency bounds a copy. Here the relay's own task sends within
//! the credit and takes what arrives, granting credit back as it takes it,
//! with the same flow control as a byte stream: at most a window is ever
//! queued for it.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, Semaphore};

use crate::frame::Frame;
use crate::mux::{MuxError, Registered, Shared};

/// Sends on a stream; its end (EOF) with [`MessageSender::finish`].
pub struct MessageSender {
    end: Arc<StreamEnd>,
    credit: Arc<Semaphore>,
}

/// What arrives on a stream, in the other side's frames. Keep it as long
/// as its sender: what arrives for a stream nobody takes from counts
/// against the other side's credit until the stream ends.
pub struct MessageReceiver {
    end: Arc<StreamEnd>,
    arriving: mpsc::UnboundedReceiver<Vec<u8>>,
    unacknowledged: Arc<AtomicU32>,
    /// Taken and not granted back yet.
    consumed: u32,
}

/// The stream's bookkeeping, shared by both halves: when the last one goes,
/// the stream is forgotten, and reset unless both directions ended with an
/// EOF.
struct StreamEnd {
    shared: Arc<Shared>,
    id: u32,
    sent_eof: AtomicBool,
    received_eof: AtomicBool,
}

pub(crate) fn split(
    shared: Arc<Shared>,
    id: u32,
    registered: Registered,
) -> (MessageSender, MessageReceiver) {
    let end = Arc::new(StreamEnd {
        shared,
        id,
        sent_eof: AtomicBool::new(false),
        received_eof: AtomicBool::new(false),
    });
    (
        MessageSender {
            end: Arc::clone(&end),
            credit: registered.credit,
        },
        MessageReceiver {
            end,
            arriving: registered.arriving,
            unacknowledged: registered.unacknowledged,
            consumed: 0,
        },
    )
}

impl MessageSender {
    /// Sends `bytes` (in frames the other side takes) once the other
    /// side granted the credit. An error when the stream or the connection
    /// is gone.
    pub async fn send(&mut self, bytes: &[u8]) -> Result<(), MuxError> {
        for chunk in bytes.chunks(self.end.shared.peer.max_data) {
            // `chunk` is at most MAX_DATA, far below u32::MAX.
            match self.credit.acquire_many(chunk.len() as u32).await {
                Ok(permit) => permit.forget(),
                Err(_) => return Err(MuxError::Closed),
            }
            let message = Frame::data_message(self.end.id, chunk);
            self.end
                .shared
                .outgoing
                .send(message)
                .await
                .map_err(|_| MuxError::Closed)?;
        }
        Ok(())
    }

    /// Says that nothing more comes from this side (the other may still
    /// send).
    pub async fn finish(&mut self) -> Result<(), MuxError> {
        self.end.shared.send(Frame::Eof { id: self.end.id }).await?;
        self.end.sent_eof.store(true, Ordering::SeqCst);
        Ok(())
    }
}

impl MessageReceiver {
    /// The next bytes from the other side; `None` at its EOF, or when the
    /// stream or the connection is gone.
    pub async fn recv(&mut self) -> Option<Vec<u8>> {
        let Some(bytes) = self.arriving.recv().await else {
            // At EOF the stream is still known; after a reset it is not.
            let id = self.end.id;
            if self.end.shared.streams().contains_key(&id) {
                self.end.received_eof.store(true, Ordering::SeqCst);
            }
            return None;
        };
        self.took(bytes).await
    }

    /// The next bytes if some arrived already (never their end: `recv`
    /// tells that).
    pub async fn try_recv(&mut self) -> Option<Vec<u8>> {
        let bytes = self.arriving.try_recv().ok()?;
        self.took(bytes).await
    }

    /// Counts `bytes` as taken, granting credit back by the batch.
    async fn took(&mut self, bytes: Vec<u8>) -> Option<Vec<u8>> {
        self.consumed += bytes.len() as u32;
        if self.consumed >= self.end.shared.peer.grant_batch() {
            // Counted off before the grant leaves: the sender's next bytes
            // may arrive as soon as it has it.
            self.unacknowledged
                .fetch_sub(self.consumed, Ordering::SeqCst);
            let credit = std::mem::take(&mut self.consumed);
            let _ = self
                .end
                .shared
                .send(Frame::Grant {
                    id: self.end.id,
                    credit,
                })
                .await;
        }
        Some(bytes)
    }
}

impl Drop for StreamEnd {
    fn drop(&mut self) {
        let id = self.id;
        let clean =
            self.sent_eof.load(Ordering::SeqCst) && self.received_eof.load(Ordering::SeqCst);
        if self.shared.streams().remove(&id).is_none() || clean {
            return;
        }
        // The other side must hear that the stream is gone, even from here
        // (no await in a drop): right away if there is room, else from a
        // task.
        let reset = Frame::Reset { id }.encode();
        if let Err(mpsc::error::TrySendError::Full(reset)) = self.shared.outgoing.try_send(reset) {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let outgoing = self.shared.outgoing.clone();
                runtime.spawn(async move {
                    let _ = outgoing.send(reset).await;
                });
            }
        }
    }
}
