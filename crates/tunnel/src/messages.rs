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

use bytes::BufMut;
use tokio::sync::{mpsc, Semaphore};

use crate::frame::Frame;
use crate::shared::{MuxError, Registered, Shared};

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

    /// Says, with one empty data frame, that the stream stays on the
    /// tunnel: its dial-back did not happen ([`crate::dial_back`]).
    pub async fn stay_on_tunnel(&mut self) -> Result<(), MuxError> {
        self.end
            .shared
            .outgoing
            .send(Frame::data_message(self.end.id, &[]))
            .await
            .map_err(|_| MuxError::Closed)
    }

    /// Reads what `reader` has (at most one frame's payload) straight into
    /// the frame that carries it, and sends it within the granted credit:
    /// a bulk copy from a socket with no copy between. `Ok(0)` at the
    /// reader's end (nothing is sent: [`MessageSender::finish`] says EOF).
    pub async fn send_read<R>(&mut self, reader: &mut R) -> std::io::Result<usize>
    where
        R: tokio::io::AsyncRead + Unpin,
    {
        use tokio::io::AsyncReadExt;
        let max = self.end.shared.peer.max_data;
        let mut message = Frame::data_header(self.end.id, max);
        let read = reader.read_buf(&mut (&mut message).limit(max)).await?;
        if read == 0 {
            return Ok(0);
        }
        // `read` <= max_data, far below u32::MAX.
        match self.credit.acquire_many(read as u32).await {
            Ok(permit) => permit.forget(),
            Err(_) => return Err(std::io::ErrorKind::BrokenPipe.into()),
        }
        self.end
            .shared
            .outgoing
            .send(message)
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        Ok(read)
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

/// A stream as whole messages, read and written as bytes
/// ([`tokio::io::AsyncRead`] and [`tokio::io::AsyncWrite`]): for a user
/// that needs a byte stream (an HTTP client) without the byte pipe and the
/// two tasks of [`crate::Mux::open`]. A chunk that arrived is handed out
/// as it is; a write is one send (in frames within the credit), driven by
/// the next write, flush or shutdown.
pub struct MessageIo {
    receiving: Receiving,
    /// The rest of the chunk being read, and where it starts.
    pending: Option<(Vec<u8>, usize)>,
    sending: Sending,
    /// The EOF was sent, or is being sent.
    finishing: bool,
}

type Pending<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

enum Receiving {
    Idle(MessageReceiver),
    Busy(Pending<(MessageReceiver, Option<Vec<u8>>)>),
    Ended,
}

enum Sending {
    Idle(MessageSender),
    Busy(Pending<(MessageSender, Result<(), MuxError>)>),
    Gone,
}

impl MessageIo {
    pub fn new(sender: MessageSender, receiver: MessageReceiver) -> MessageIo {
        MessageIo {
            receiving: Receiving::Idle(receiver),
            pending: None,
            sending: Sending::Idle(sender),
            finishing: false,
        }
    }

    /// The stream with `chunk` (taken from its receiver already) read
    /// first.
    pub fn starting_with(mut self, chunk: Vec<u8>) -> MessageIo {
        if !chunk.is_empty() {
            self.pending = Some((chunk, 0));
        }
        self
    }

    /// Drives the send in flight to its end.
    fn poll_sent(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        if let Sending::Busy(future) = &mut self.sending {
            match future.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready((sender, result)) => {
                    self.sending = Sending::Idle(sender);
                    if result.is_err() {
                        self.sending = Sending::Gone;
                        return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
                    }
                }
            }
        }
        match self.sending {
            Sending::Gone => Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into())),
            _ => Poll::Ready(Ok(())),
        }
    }
}

impl tokio::io::AsyncRead for MessageIo {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        let this = self.get_mut();
        loop {
            if let Some((chunk, at)) = &mut this.pending {
                let n = (chunk.len() - *at).min(buf.remaining());
                buf.put_slice(&chunk[*at..*at + n]);
                *at += n;
                if *at == chunk.len() {
                    this.pending = None;
                }
                return Poll::Ready(Ok(()));
            }
            match std::mem::replace(&mut this.receiving, Receiving::Ended) {
                Receiving::Ended => return Poll::Ready(Ok(())),
                Receiving::Idle(mut receiver) => {
                    this.receiving = Receiving::Busy(Box::pin(async move {
                        let bytes = receiver.recv().await;
                        (receiver, bytes)
                    }));
                }
                Receiving::Busy(mut future) => match future.as_mut().poll(cx) {
                    Poll::Pending => {
                        this.receiving = Receiving::Busy(future);
                        return Poll::Pending;
                    }
                    Poll::Ready((_, None)) => return Poll::Ready(Ok(())),
                    Poll::Ready((receiver, Some(bytes))) => {
                        this.receiving = Receiving::Idle(receiver);
                        if !bytes.is_empty() {
                            this.pending = Some((bytes, 0));
                        }
                    }
                },
            }
        }
    }
}

impl tokio::io::AsyncWrite for MessageIo {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        use std::task::Poll;
        let this = self.get_mut();
        match this.poll_sent(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
            Poll::Ready(Ok(())) => {}
        }
        let Sending::Idle(mut sender) = std::mem::replace(&mut this.sending, Sending::Gone) else {
            return Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()));
        };
        let bytes = buf.to_vec();
        this.sending = Sending::Busy(Box::pin(async move {
            let result = sender.send(&bytes).await;
            (sender, result)
        }));
        // Started: the next write, flush or shutdown drives it.
        let _ = this.poll_sent(cx);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        self.get_mut().poll_sent(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        let this = self.get_mut();
        if !this.finishing {
            match this.poll_sent(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => {}
            }
            let Sending::Idle(mut sender) = std::mem::replace(&mut this.sending, Sending::Gone)
            else {
                return Poll::Ready(Ok(()));
            };
            this.finishing = true;
            this.sending = Sending::Busy(Box::pin(async move {
                let result = sender.finish().await;
                (sender, result)
            }));
        }
        match this.poll_sent(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => {
                // Nothing more is written after a shutdown.
                this.sending = Sending::Gone;
                Poll::Ready(Ok(()))
            }
        }
    }
}
