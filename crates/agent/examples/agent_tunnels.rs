//! A load generator for benches/tls-tunnels.sh: holds one agent tunnel open
//! per token of TOKENS_FILE, the way the agent does (the agent's own dial,
//! the tunnel's mux on the agent's side, a ping every 15 s), and serves no
//! stream: a server full of idle workspaces whose agents heartbeat.
//!
//! Prints `N tunnels up` once every tunnel is connected, then a line each
//! time one drops. Runs until killed.
//!
//! Usage: agent_tunnels URL TOKENS_FILE
//!   URL: the server's access URL (`https://` for `wss://` tunnels);
//!   ABODE_CA_CERT: a CA file to trust besides the system's.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::error::Error;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use abode_agent::wsdial;
use abode_tunnel::{Mux, Side};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::{mpsc, Semaphore};
use tokio_tungstenite::tungstenite::Message;

/// The agent's interval between pings (crates/agent/src/tunnel.rs).
const PING: Duration = Duration::from_secs(15);
/// Handshakes under way at once: a fleet of agents does not all start in
/// the same millisecond.
const DIALING: usize = 32;

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, tokens] = args.as_slice() else {
        return Err("usage: agent_tunnels URL TOKENS_FILE".into());
    };
    let added = std::env::var_os("ABODE_CA_CERT").map(PathBuf::from);
    abode_tls::install_trust(match &added {
        Some(path) => abode_tls::AddedAuthorities::File(path),
        None => abode_tls::AddedAuthorities::None,
    })?;
    let tokens: Vec<String> = std::fs::read_to_string(tokens)?
        .lines()
        .filter(|line| !line.is_empty())
        .map(str::to_string)
        .collect();
    // One thread, as one agent's tunnel has: the generator must stay small
    // beside the server it loads.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(hold(url.clone(), tokens))
}

async fn hold(url: String, tokens: Vec<String>) -> Result<(), Box<dyn Error>> {
    let total = tokens.len();
    let up = Arc::new(AtomicUsize::new(0));
    let dialing = Arc::new(Semaphore::new(DIALING));
    let (connected, mut connected_rx) = mpsc::channel::<Result<(), String>>(total.max(1));
    for token in tokens {
        let (url, up, dialing, connected) =
            (url.clone(), up.clone(), dialing.clone(), connected.clone());
        tokio::spawn(async move {
            let permit = dialing.acquire_owned().await;
            let dialed =
                wsdial::dial_tunnel(&url, abode_client::connect::AGENT_CONNECT_PATH, &token).await;
            drop(permit);
            match dialed {
                Ok((socket, limits)) => {
                    up.fetch_add(1, Ordering::SeqCst);
                    let _ = connected.send(Ok(())).await;
                    tunnel(socket, limits).await;
                    let left = up.fetch_sub(1, Ordering::SeqCst) - 1;
                    println!("a tunnel dropped; {left} up");
                }
                Err(error) => {
                    let _ = connected.send(Err(error.to_string())).await;
                }
            }
        });
    }
    drop(connected);
    for _ in 0..total {
        match connected_rx.recv().await {
            Some(Ok(())) => {}
            Some(Err(error)) => return Err(format!("a tunnel failed: {error}").into()),
            None => break,
        }
    }
    println!("{} tunnels up", up.load(Ordering::SeqCst));
    std::future::pending::<()>().await;
    Ok(())
}

/// One idle tunnel: the mux answers the server, pings keep it alive.
async fn tunnel(socket: wsdial::Socket, limits: abode_tunnel::frame::PeerLimits) {
    let (outgoing, mut to_server) = mpsc::channel::<Vec<u8>>(8);
    let (from_server, incoming) = mpsc::channel::<Vec<u8>>(8);
    let (_mux, _accept, _task) = Mux::start_with_peer(Side::Agent, limits, incoming, outgoing);
    let (mut sink, mut source) = socket.split();
    let mut ping = tokio::time::interval(PING);
    loop {
        tokio::select! {
            message = source.next() => match message {
                Some(Ok(Message::Binary(bytes))) => {
                    if from_server.send(bytes).await.is_err() {
                        return;
                    }
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => {}
            },
            frame = to_server.recv() => match frame {
                Some(frame) => {
                    if sink.send(Message::Binary(frame)).await.is_err() {
                        return;
                    }
                }
                None => return,
            },
            _ = ping.tick() => {
                if sink.send(Message::Ping(Vec::new())).await.is_err() {
                    return;
                }
            }
        }
    }
}
