//! The agent's tunnel: one long-lived WebSocket to the server (the access
//! URL the agent already uses, `/api/v1/agent/connect`, with its agent
//! token), reconnected with a capped exponential backoff whenever it drops
//! (a server restart, a network cut). A reconnect needs no new build: the
//! token stays valid while the workspace is started.
//!
//! Over it the server opens one stream per person's connection
//! ([`abode_tunnel`]); each stream's header says what it is for: SSH (served
//! by [`crate::ssh`]), a TCP port inside the workspace, or a web
//! terminal's session ([`crate::pty`], kept across reconnections of
//! the tunnel itself).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use abode_tunnel::{Incoming, Mux, Side, StreamKind, StreamRequest};
use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use crate::pty::Terminals;
use crate::ssh::SessionSettings;
use crate::wsdial::{dial_tunnel, DialError};

const FIRST_RETRY: Duration = Duration::from_millis(250);
const MAX_RETRY: Duration = Duration::from_secs(5);
/// Both sides ping every 15 s: a tunnel silent for longer than this is dead
/// (a cut network shows no close).
const PING: Duration = Duration::from_secs(15);
const SILENCE: Duration = Duration::from_secs(60);
/// At most this many queued frames after the first go out in one write.
const BATCH: usize = 32;

/// Runs the tunnel on a thread of its own until `stop` is set.
pub fn spawn(
    url: String,
    token: String,
    settings: SessionSettings,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    // One thread for the tunnel, every stream and every SSH session: each
    // byte of a copy passes through several tasks (socket, tunnel, SSH
    // server, process), and a hand-over between threads costs a wake-up of
    // the other thread, which on a busy machine is the latency that bounds
    // a copy (an SSH client's window of 2 MiB per round trip).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("abode-tunnel".into())
        .spawn(move || {
            let terminals = Arc::new(Terminals::default());
            runtime.block_on(run(url, token, Arc::new(settings), terminals, stop));
            runtime.shutdown_background();
        })
}

fn log(message: &str) {
    eprintln!("abode agent: {message}");
}

async fn run(
    url: String,
    token: String,
    settings: Arc<SessionSettings>,
    terminals: Arc<Terminals>,
    stop: Arc<AtomicBool>,
) {
    let dial_back = Arc::new(DialBackTo {
        base_url: url.clone(),
        token: token.clone(),
        last_error: std::sync::Mutex::new(String::new()),
    });
    let mut delay = FIRST_RETRY;
    let mut last_error = String::new();
    while !stop.load(Ordering::SeqCst) {
        match dial_tunnel(&url, abode_client::connect::AGENT_CONNECT_PATH, &token).await {
            Ok((socket, server_limits)) => {
                log("tunnel connected: the workspace accepts connections");
                last_error.clear();
                delay = FIRST_RETRY;
                let closed = serve(
                    socket,
                    server_limits,
                    &settings,
                    &terminals,
                    &dial_back,
                    &stop,
                )
                .await;
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                match closed {
                    Some(code) if code == abode_tunnel::CLOSE_REPLACED => {
                        // Two live processes with one token would take the
                        // tunnel from each other as fast as they reconnect.
                        log("the server took a newer tunnel with this agent's token (is another agent running with it?); reconnecting in a while");
                        delay = MAX_RETRY;
                    }
                    Some(code) if code == abode_tunnel::CLOSE_GONE => {
                        log("the server says this agent is no longer its workspace's; retrying in a while");
                        delay = MAX_RETRY;
                    }
                    _ => log("tunnel lost, reconnecting"),
                }
            }
            Err(error) => {
                let text = match &error {
                    DialError::Refused { status: 401, .. } => {
                        format!("the server does not accept this agent's token (yet): {error}")
                    }
                    other => other.to_string(),
                };
                // The same failure every 5 s would drown the output.
                if text != last_error {
                    log(&format!("tunnel failed, retrying: {text}"));
                    last_error = text;
                }
            }
        }
        let mut slept = Duration::ZERO;
        while slept < delay && !stop.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(50)).await;
            slept += Duration::from_millis(50);
        }
        delay = (delay * 2).min(MAX_RETRY);
    }
}

/// Carries the tunnel until the socket drops or the agent stops; the close
/// code the server ended it with, if it said one.
async fn serve(
    socket: crate::wsdial::Socket,
    server_limits: abode_tunnel::frame::PeerLimits,
    settings: &Arc<SessionSettings>,
    terminals: &Arc<Terminals>,
    dial_back: &Arc<DialBackTo>,
    stop: &AtomicBool,
) -> Option<u16> {
    let (outgoing, mut to_server) = mpsc::channel::<Vec<u8>>(64);
    let (from_server, incoming) = mpsc::channel::<Vec<u8>>(64);
    let (_mux, mut accept, _task): (Mux, _, _) =
        Mux::start_with_peer(Side::Agent, server_limits, incoming, outgoing);
    let (mut sink, mut source) = socket.split();
    let mut check_stop = tokio::time::interval(Duration::from_millis(250));
    let mut ping = tokio::time::interval(PING);
    let mut last_heard = tokio::time::Instant::now();
    loop {
        tokio::select! {
            message = source.next() => {
                last_heard = tokio::time::Instant::now();
                match message {
                    Some(Ok(Message::Binary(bytes))) => {
                        if from_server.send(bytes).await.is_err() {
                            break;
                        }
                    }
                    Some(Ok(Message::Close(frame))) => {
                        return frame.map(|frame| u16::from(frame.code));
                    }
                    Some(Err(_)) | None => break,
                    // Pings are answered by the socket itself.
                    Some(Ok(_)) => {}
                }
            },
            _ = ping.tick() => {
                if last_heard.elapsed() > SILENCE
                    || sink.send(Message::Ping(Vec::new())).await.is_err()
                {
                    break;
                }
            }
            frame = to_server.recv() => match frame {
                Some(frame) => {
                    if send_queued(&mut sink, frame, &mut to_server).await.is_err() {
                        break;
                    }
                }
                None => break,
            },
            stream = accept.recv() => match stream {
                Some(incoming) => {
                    tokio::spawn(handle_stream(
                        incoming,
                        Arc::clone(settings),
                        Arc::clone(terminals),
                        Arc::clone(dial_back),
                    ));
                }
                None => break,
            },
            _ = check_stop.tick() => {
                if stop.load(Ordering::SeqCst) {
                    let _ = sink.send(Message::Close(None)).await;
                    break;
                }
            }
        }
    }
    None
}

/// Frames queued together leave in one write: `frame`, then whatever else
/// is already waiting (up to a bound, so pings and the stop check still get
/// their turn), then one flush. A bulk copy otherwise pays a system call
/// and a wake-up of the server per frame.
async fn send_queued<S>(
    sink: &mut S,
    frame: Vec<u8>,
    queue: &mut mpsc::Receiver<Vec<u8>>,
) -> Result<(), S::Error>
where
    S: futures_util::Sink<Message> + Unpin,
{
    sink.feed(Message::Binary(frame)).await?;
    for _ in 0..BATCH {
        match queue.try_recv() {
            Ok(frame) => sink.feed(Message::Binary(frame)).await?,
            Err(_) => break,
        }
    }
    sink.flush().await
}

/// Serves one stream the server opened, as its header says.
async fn handle_stream(
    incoming: Incoming,
    settings: Arc<SessionSettings>,
    terminals: Arc<Terminals>,
    dial_back: Arc<DialBackTo>,
) {
    let request: StreamRequest = match serde_json::from_slice(&incoming.header) {
        Ok(request) => request,
        Err(error) => {
            log(&format!(
                "refusing a stream with an unreadable header: {error}"
            ));
            return;
        }
    };
    if let (StreamKind::Pty, Some(open)) = (request.kind, &request.terminal) {
        if let Err(error) = terminals
            .attach(&request.user, open, incoming.into_stream(), &settings)
            .await
        {
            log(&format!(
                "terminal session {} of {} ended: {error}",
                open.session, request.user
            ));
        }
        return;
    }
    match (request.kind, request.port, request.host_key.as_deref()) {
        (StreamKind::Ssh, _, Some(seed)) => {
            if let Err(error) = crate::ssh::serve(incoming.into_stream(), seed, settings).await {
                log(&format!("ssh session of {} ended: {error}", request.user));
            }
        }
        (StreamKind::PortForward, Some(port), _) => {
            let host = request.host.as_deref().unwrap_or("localhost");
            match TcpStream::connect((host, port)).await {
                Ok(tcp) => match request.dial_back.as_deref() {
                    Some(ticket) => forward_dialed(incoming, tcp, &dial_back, ticket).await,
                    None => forward(incoming, tcp).await,
                },
                // Dropped untaken, the stream is reset: the person's end
                // sees the refusal.
                Err(error) => log(&format!(
                    "port-forward of {} to {host}:{port}: {error}",
                    request.user
                )),
            }
        }
        (kind, _, _) => log(&format!(
            "refusing a {} stream without what it needs",
            kind.as_str()
        )),
    }
}

/// Moves a forwarded port's bytes between the tunnel's stream and `tcp`:
/// what the socket has is read straight into the frames that carry it, and
/// what arrives is written straight to the socket (an app's download is a
/// bulk copy: no pipe, copy or task between). Each direction ends with its
/// EOF; a failed socket resets the stream.
async fn forward(incoming: Incoming, tcp: TcpStream) {
    let (sender, receiver) = incoming.into_messages();
    forward_messages(sender, receiver, tcp).await;
}

/// Where and as whom the agent dials back ([`abode_tunnel::dial_back`]).
struct DialBackTo {
    base_url: String,
    token: String,
    /// The last failure logged: the same one for every request of a
    /// deployment whose proxy refuses dial-backs would drown the output.
    last_error: std::sync::Mutex<String>,
}

/// The buffer of a dialed-back copy from the app to the server: a few of
/// the app's writes at once, so a bulk download moves in few system calls.
const DIALED_DOWNLOAD_BUFFER: usize = 256 * 1024;
/// The other way (a request, an upload) is rarely bulk: an agent serving
/// many requests at once keeps its memory.
const DIALED_UPLOAD_BUFFER: usize = 64 * 1024;

/// Carries a forwarded port's stream on a connection of its own to the
/// server (the stream's ticket); where that cannot be had, on the tunnel
/// as [`forward`] does, after saying so on the stream.
async fn forward_dialed(incoming: Incoming, mut tcp: TcpStream, to: &DialBackTo, ticket: &str) {
    let _ = tcp.set_nodelay(true);
    let (mut sender, receiver) = incoming.into_messages();
    match crate::dial_back::dial(&to.base_url, &to.token, ticket).await {
        Ok(mut server) => {
            // A failure that comes back after this is news again.
            to.last_error
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clear();
            // The tunnel's stream stays open until the copy ends: the
            // server drops it once the connection reached it.
            let _ = tokio::io::copy_bidirectional_with_sizes(
                &mut tcp,
                &mut server,
                DIALED_DOWNLOAD_BUFFER,
                DIALED_UPLOAD_BUFFER,
            )
            .await;
            drop((sender, receiver));
        }
        Err(error) => {
            let text = error.to_string();
            let repeated = {
                let mut last = to
                    .last_error
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                std::mem::replace(&mut *last, text.clone()) == text
            };
            if !repeated {
                log(&format!(
                    "a dial-back to the server failed, carrying the stream on the tunnel instead: {text}"
                ));
            }
            if sender.stay_on_tunnel().await.is_ok() {
                forward_messages(sender, receiver, tcp).await;
            }
        }
    }
}

/// [`forward`] of a stream already taken as messages.
async fn forward_messages(
    mut sender: abode_tunnel::MessageSender,
    mut receiver: abode_tunnel::MessageReceiver,
    tcp: TcpStream,
) {
    let _ = tcp.set_nodelay(true);
    let (mut from_port, mut to_port) = tcp.into_split();
    let upload = async {
        while let Some(bytes) = receiver.recv().await {
            if to_port.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = to_port.shutdown().await;
    };
    let download = async {
        loop {
            match sender.send_read(&mut from_port).await {
                Ok(0) => {
                    let _ = sender.finish().await;
                    return;
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    };
    tokio::join!(upload, download);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A server that answers a dial-back with `answer` (its head) and
    /// then echoes what it is sent; its port.
    async fn dial_back_server(answer: &'static str) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if socket.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        port
    }

    /// A port that echoes (the app); its port.
    async fn echo_app() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut read, mut write) = socket.into_split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                });
            }
        });
        port
    }

    /// The server's and the agent's ends of one tunnel.
    fn tunnel() -> (Mux, mpsc::Receiver<Incoming>) {
        let (to_agent, agent_incoming) = mpsc::channel(64);
        let (to_server, server_incoming) = mpsc::channel(64);
        let (server, _server_accept, _server_task) =
            Mux::start(Side::Server, server_incoming, to_agent);
        let (_agent, agent_accept, _agent_task) =
            Mux::start(Side::Agent, agent_incoming, to_server);
        (server, agent_accept)
    }

    #[tokio::test]
    async fn a_stream_whose_dial_back_fails_says_so_and_stays_on_the_tunnel() {
        let closed = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let cases = [
            ("nobody listens", format!("http://127.0.0.1:{closed}")),
            (
                "another server (no such ticket)",
                format!(
                    "http://127.0.0.1:{}",
                    dial_back_server("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n").await
                ),
            ),
            (
                "a proxy that switches to something else",
                format!(
                    "http://127.0.0.1:{}",
                    dial_back_server(
                        "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n"
                    )
                    .await
                ),
            ),
            ("not a URL the agent dials", "ftp://127.0.0.1".to_string()),
        ];
        let app = echo_app().await;
        let valid = "7".repeat(64);
        let endless_head: &'static str =
            Box::leak(format!("HTTP/1.1 101 {}", "x".repeat(64 * 1024)).into_boxed_str());
        let cases = cases
            .into_iter()
            .map(|(case, url)| (case, url, valid.clone()))
            .chain([
                (
                    "an endless head",
                    format!("http://127.0.0.1:{}", dial_back_server(endless_head).await),
                    valid.clone(),
                ),
                (
                    "a ticket that is none",
                    format!(
                        "http://127.0.0.1:{}",
                        dial_back_server(
                            "HTTP/1.1 101 Switching Protocols\r\nupgrade: abode-stream\r\n\r\n"
                        )
                        .await
                    ),
                    "ticket\r\nx-injected: 1".to_string(),
                ),
            ]);
        for (case, base_url, ticket) in cases {
            let (server, mut accept) = tunnel();
            let (mut sender, mut receiver) = server.open_messages(b"{}".to_vec()).await.unwrap();
            let incoming = accept.recv().await.unwrap();
            let to = DialBackTo {
                base_url,
                token: "agent-token".into(),
                last_error: std::sync::Mutex::new(String::new()),
            };
            let tcp = TcpStream::connect(("127.0.0.1", app)).await.unwrap();
            let agent =
                tokio::spawn(async move { forward_dialed(incoming, tcp, &to, &ticket).await });
            assert_eq!(
                receiver.recv().await,
                Some(Vec::new()),
                "{case}: the marker first"
            );
            sender.send(b"through the tunnel").await.unwrap();
            assert_eq!(
                receiver.recv().await.as_deref(),
                Some(&b"through the tunnel"[..]),
                "{case}"
            );
            sender.finish().await.unwrap();
            assert_eq!(receiver.recv().await, None, "{case}: the app's EOF");
            agent.await.unwrap();
        }
    }

    #[tokio::test]
    async fn a_dialed_back_stream_carries_the_bytes_on_its_own_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = echo_app().await;
        let (server, mut accept) = tunnel();
        let (_sender, mut receiver) = server.open_messages(b"{}".to_vec()).await.unwrap();
        let incoming = accept.recv().await.unwrap();
        let to = DialBackTo {
            base_url: format!("http://127.0.0.1:{port}/prefix/"),
            token: "agent-token".into(),
            last_error: std::sync::Mutex::new(String::new()),
        };
        let tcp = TcpStream::connect(("127.0.0.1", app)).await.unwrap();
        let ticket = "a1".repeat(32);
        let sent = ticket.clone();
        let agent = tokio::spawn(async move { forward_dialed(incoming, tcp, &to, &sent).await });
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            assert_eq!(socket.read(&mut byte).await.unwrap(), 1);
            head.push(byte[0]);
        }
        let head = String::from_utf8(head).unwrap();
        assert!(
            head.starts_with("GET /prefix/api/v1/agent/streams HTTP/1.1\r\n"),
            "{head}"
        );
        for line in [
            "Authorization: Bearer agent-token".to_string(),
            format!("x-abode-stream-ticket: {ticket}"),
            "Upgrade: abode-stream".to_string(),
            "Connection: Upgrade".to_string(),
        ] {
            assert!(head.contains(&line), "{head}");
        }
        // The answer and the first bytes of the stream in one write: the
        // agent keeps what followed the head.
        socket
            .write_all(b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: abode-stream\r\n\r\nhello app")
            .await
            .unwrap();
        let mut echoed = [0u8; 9];
        socket.read_exact(&mut echoed).await.unwrap();
        assert_eq!(&echoed, b"hello app");
        socket.shutdown().await.unwrap();
        let mut rest = Vec::new();
        socket.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "the app's EOF ends the connection");
        agent.await.unwrap();
        // Nothing of it went through the tunnel: its stream just ended.
        assert_eq!(receiver.recv().await, None);
    }
}
