//! Streams over one message transport.
//!
//! [`Mux::start`] takes the transport as two channels of whole messages (what
//! arrives, what to send) and runs the connection on a task. Either side may
//! open streams (the server's ids are even, the agent's odd, so they never
//! collide); each stream is handed to its user as a [`DuplexStream`], an
//! ordinary `AsyncRead + AsyncWrite`. Behind it, two small tasks per stream
//! move bytes: one sends what the user writes, within the credit the other
//! side granted; the other writes what arrives and grants credit back once
//! the user's end took it. So at most [`WINDOW`] bytes of a stream are ever
//! queued on the receiving side, and the connection's reader never waits
//! for a slow stream. Credit goes back in batches of a quarter window (a
//! grant per data frame would double the messages of a bulk copy); the
//! credit held back is always less than a window minus a frame, so a sender
//! never waits on it (nor does an interactive session's next keystroke).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;

use crate::frame::{Frame, PeerLimits, MAX_DATA, WINDOW};
use crate::messages::{MessageReceiver, MessageSender};
pub use crate::shared::MuxError;
use crate::shared::{register_entry, Registered, Shared};

/// Buffer of the in-process pipe between a stream's user and its tasks:
/// room for a few whole frames, so a writer's bytes leave in full frames.
const PIPE_BYTES: usize = 4 * MAX_DATA;

/// Which end of the connection this is (it decides the parity of the ids
/// it opens streams with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Server,
    Agent,
}

/// A stream the other side opened: its header, and the stream itself,
/// taken as a byte pipe ([`Incoming::into_stream`]) or as whole messages
/// ([`Incoming::into_messages`]). Dropped untaken, the stream is reset.
pub struct Incoming {
    pub header: Vec<u8>,
    opened: Option<Opened>,
}

/// A registered stream not yet taken by its user.
struct Opened {
    shared: Arc<Shared>,
    id: u32,
    registered: Registered,
}

impl Incoming {
    fn take(mut self) -> Opened {
        match self.opened.take() {
            Some(opened) => opened,
            // Only `into_*` take it, and they consume `self`.
            None => unreachable!("an incoming stream is taken once"),
        }
    }

    /// The stream as an ordinary `AsyncRead + AsyncWrite` (two small tasks
    /// move its frames).
    pub fn into_stream(self) -> DuplexStream {
        let Opened {
            shared,
            id,
            registered,
        } = self.take();
        spawn_pipe(&shared, id, registered)
    }

    /// The stream as whole messages, with no pipe, copy or task between:
    /// for a bulk copy to or from a socket
    /// ([`MessageSender::send_read`](crate::MessageSender::send_read)).
    pub fn into_messages(self) -> (crate::MessageSender, crate::MessageReceiver) {
        let Opened {
            shared,
            id,
            registered,
        } = self.take();
        crate::messages::split(shared, id, registered)
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        if let Some(opened) = self.opened.take() {
            // Nobody took it: the other side hears it is gone.
            drop(crate::messages::split(
                opened.shared,
                opened.id,
                opened.registered,
            ));
        }
    }
}

/// A handle on a running connection: opens streams. Cheap to clone.
#[derive(Clone)]
pub struct Mux {
    shared: Arc<Shared>,
}

impl Mux {
    /// Runs the connection over `incoming`/`outgoing` on a task. Streams the
    /// other side opens arrive on the returned receiver; the task ends (with
    /// why) when `incoming` closes or a malformed frame arrives, and then
    /// every stream ends too.
    pub fn start(
        side: Side,
        incoming: mpsc::Receiver<Vec<u8>>,
        outgoing: mpsc::Sender<Vec<u8>>,
    ) -> (
        Mux,
        mpsc::Receiver<Incoming>,
        JoinHandle<Result<(), MuxError>>,
    ) {
        Mux::start_with_peer(side, PeerLimits::CURRENT, incoming, outgoing)
    }

    /// [`Mux::start`] with a peer that takes what `peer` says (see
    /// [`PeerLimits::from_header`]); this side still takes frames of up to
    /// [`MAX_DATA`] and a window of [`WINDOW`].
    pub fn start_with_peer(
        side: Side,
        peer: PeerLimits,
        incoming: mpsc::Receiver<Vec<u8>>,
        outgoing: mpsc::Sender<Vec<u8>>,
    ) -> (
        Mux,
        mpsc::Receiver<Incoming>,
        JoinHandle<Result<(), MuxError>>,
    ) {
        let first_id = match side {
            Side::Server => 2,
            Side::Agent => 1,
        };
        let peer = PeerLimits {
            max_data: peer.max_data.clamp(1, MAX_DATA),
            window: peer.window,
        };
        let shared = Arc::new(Shared::new(first_id, peer, outgoing));
        let (accepted, accept) = mpsc::channel(16);
        let task = tokio::spawn(read_loop(Arc::clone(&shared), incoming, accepted));
        (Mux { shared }, accept, task)
    }

    /// Opens a stream whose `Open` frame carries `header`.
    pub async fn open(&self, header: Vec<u8>) -> Result<DuplexStream, MuxError> {
        let id = self.next_stream_id()?;
        let user_end = register(&self.shared, id);
        self.announce(id, header).await?;
        Ok(user_end)
    }

    /// The id of a stream this side opens, while the connection is up.
    fn next_stream_id(&self) -> Result<u32, MuxError> {
        if self.shared.outgoing.is_closed() {
            return Err(MuxError::Closed);
        }
        Ok(self.shared.next_id.fetch_add(2, Ordering::Relaxed))
    }

    /// Sends the `Open` frame of registered stream `id`; a stream the peer
    /// never heard of is unregistered again.
    async fn announce(&self, id: u32, header: Vec<u8>) -> Result<(), MuxError> {
        if let Err(error) = self.shared.send(Frame::Open { id, header }).await {
            self.shared.streams().remove(&id);
            return Err(error);
        }
        Ok(())
    }

    /// Opens a stream whose `Open` frame carries `header`, as whole
    /// messages instead of a byte pipe: for a relay whose other side is
    /// messages too (the server between a person's WebSocket and the
    /// agent's tunnel), with no pipe, copy or task between.
    pub async fn open_messages(
        &self,
        header: Vec<u8>,
    ) -> Result<(MessageSender, MessageReceiver), MuxError> {
        let id = self.next_stream_id()?;
        let registered = register_entry(&self.shared, id);
        self.announce(id, header).await?;
        Ok(crate::messages::split(
            Arc::clone(&self.shared),
            id,
            registered,
        ))
    }

    /// Records that the other side said it dials back
    /// ([`crate::dial_back::DIAL_BACK_HEADER`]).
    pub fn set_peer_dials_back(&self) {
        self.shared.peer_dials_back.store(true, Ordering::SeqCst);
    }

    /// Whether the other side said it dials back.
    pub fn peer_dials_back(&self) -> bool {
        self.shared.peer_dials_back.load(Ordering::SeqCst)
    }

    /// Whether the connection is still up.
    pub fn is_open(&self) -> bool {
        !self.shared.outgoing.is_closed()
    }

    /// How many streams are open now.
    pub fn stream_count(&self) -> usize {
        self.shared.streams().len()
    }
}

async fn read_loop(
    shared: Arc<Shared>,
    mut incoming: mpsc::Receiver<Vec<u8>>,
    accepted: mpsc::Sender<Incoming>,
) -> Result<(), MuxError> {
    let result = async {
        while let Some(message) = incoming.recv().await {
            match Frame::decode(message)? {
                Frame::Open { id, header } => {
                    if shared.streams().contains_key(&id) {
                        return Err(MuxError::DuplicateStream(id));
                    }
                    let registered = register_entry(&shared, id);
                    let incoming = Incoming {
                        header,
                        opened: Some(Opened {
                            shared: Arc::clone(&shared),
                            id,
                            registered,
                        }),
                    };
                    if let Err(refused) = accepted.send(incoming).await {
                        // Nobody accepts streams on this side: refuse it.
                        let mut refused = refused.0;
                        refused.opened = None;
                        shared.streams().remove(&id);
                        shared.send(Frame::Reset { id }).await?;
                    }
                }
                Frame::Data { id, bytes } => {
                    let target = match shared.streams().get_mut(&id) {
                        Some(entry) => {
                            // An empty frame spends no credit: one per
                            // stream is a word (its dial-back did not
                            // happen, `MessageSender::stay_on_tunnel`), more
                            // would queue here without bound.
                            if bytes.is_empty() && std::mem::replace(&mut entry.sent_empty, true) {
                                return Err(MuxError::FlowControl(id));
                            }
                            entry
                                .inbound
                                .clone()
                                .map(|sender| (sender, Arc::clone(&entry.unacknowledged)))
                        }
                        None => None,
                    };
                    // Data for a stream already gone is dropped: the Reset
                    // that said so crossed it on the way.
                    if let Some((sender, unacknowledged)) = target {
                        // `bytes` is at most MAX_DATA (decode checked it).
                        let before = unacknowledged.fetch_add(bytes.len() as u32, Ordering::SeqCst);
                        if before + bytes.len() as u32 > WINDOW {
                            return Err(MuxError::FlowControl(id));
                        }
                        let _ = sender.send(bytes);
                    }
                }
                Frame::Eof { id } => {
                    if let Some(entry) = shared.streams().get_mut(&id) {
                        entry.inbound = None;
                    }
                }
                Frame::Reset { id } => {
                    if let Some(entry) = shared.streams().remove(&id) {
                        entry.credit.close();
                    }
                }
                Frame::Grant { id, credit } => {
                    if let Some(entry) = shared.streams().get(&id) {
                        // Only what was sent comes back: never past a window.
                        let granted = entry.credit.available_permits() + credit as usize;
                        if granted > shared.peer.window as usize {
                            return Err(MuxError::FlowControl(id));
                        }
                        entry.credit.add_permits(credit as usize);
                    }
                }
            }
        }
        Ok(())
    }
    .await;
    // The connection is gone: every stream ends (its user reads EOF, its
    // writes fail).
    for (_, entry) in shared.streams().drain() {
        entry.credit.close();
    }
    result
}

/// Records stream `id` and starts its tasks; the user's end of its pipe.
fn register(shared: &Arc<Shared>, id: u32) -> DuplexStream {
    let registered = register_entry(shared, id);
    spawn_pipe(shared, id, registered)
}

/// Starts the tasks of registered stream `id`; the user's end of its pipe.
fn spawn_pipe(shared: &Arc<Shared>, id: u32, registered: Registered) -> DuplexStream {
    let (user_end, our_end) = tokio::io::duplex(PIPE_BYTES);
    let Registered {
        arriving,
        unacknowledged,
        credit,
    } = registered;
    let (reader, writer) = tokio::io::split(our_end);
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        let sending = send_side(&shared, id, reader, &credit);
        let receiving = receive_side(&shared, id, writer, arriving, &unacknowledged);
        let (sent, received) = tokio::join!(sending, receiving);
        let reset = !(sent && received);
        if shared.streams().remove(&id).is_some() && reset {
            let _ = shared.send(Frame::Reset { id }).await;
        }
    });
    user_end
}

/// Sends what the user writes, within the granted credit; EOF when the user
/// shuts its end down. False when the stream was cut short.
async fn send_side(
    shared: &Shared,
    id: u32,
    mut reader: tokio::io::ReadHalf<DuplexStream>,
    credit: &Semaphore,
) -> bool {
    let mut buffer = vec![0u8; shared.peer.max_data];
    loop {
        let read = match reader.read(&mut buffer).await {
            Ok(0) => return shared.send(Frame::Eof { id }).await.is_ok(),
            Ok(read) => read,
            Err(_) => return false,
        };
        // `read` <= MAX_DATA, far below u32::MAX.
        match credit.acquire_many(read as u32).await {
            Ok(permit) => permit.forget(),
            Err(_) => return false,
        }
        let message = Frame::data_message(id, &buffer[..read]);
        if shared.outgoing.send(message).await.is_err() {
            return false;
        }
    }
}

/// Writes what arrives to the user's end and grants the credit back once
/// written; shuts the user's end down at the other side's EOF. False when
/// the user's end is gone or the stream was reset.
async fn receive_side(
    shared: &Shared,
    id: u32,
    mut writer: tokio::io::WriteHalf<DuplexStream>,
    mut arriving: mpsc::UnboundedReceiver<Vec<u8>>,
    unacknowledged: &AtomicU32,
) -> bool {
    // Written to the user's end and not granted back yet.
    let mut consumed: u32 = 0;
    while let Some(bytes) = arriving.recv().await {
        if writer.write_all(&bytes).await.is_err() {
            return false;
        }
        consumed += bytes.len() as u32;
        if consumed >= shared.peer.grant_batch() {
            // Counted off before the grant leaves: the sender's next bytes
            // may arrive as soon as it has it.
            unacknowledged.fetch_sub(consumed, Ordering::SeqCst);
            let credit = std::mem::take(&mut consumed);
            if shared.send(Frame::Grant { id, credit }).await.is_err() {
                return false;
            }
        }
    }
    let _ = writer.shutdown().await;
    // The sender is dropped at EOF (entry kept) or at reset (entry removed).
    shared.streams().contains_key(&id)
}
