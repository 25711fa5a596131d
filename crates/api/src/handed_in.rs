//! Connections a workspace makes to the access URL from inside its own
//! network, handed to this server as they are.
//!
//! A workspace's network reaches the host only through the supervisor's
//! forward of the access URL's loopback port
//! (`abode_sandbox::network`). Relaying each connection to this process
//! through the host's loopback copied every byte an agent sends (ssh, apps)
//! once more and cost the app download a sixth of its speed; as the
//! forward's listener belongs to this process, its connections are served
//! here directly instead, by the listener whose address they were made to,
//! with the same router, client address and TLS as a connection to it.

use std::time::Duration;

use abode_terraform::machine::{HandOff, LocalServer};
use axum::Router;
use tokio::sync::{mpsc, watch};

/// The connections handed in to one of this server's addresses.
pub(crate) type Handed = mpsc::UnboundedReceiver<std::net::TcpStream>;

/// From now on, connections made inside a workspace's network to `address`
/// come out of the returned receiver.
pub(crate) fn take(local: &LocalServer, address: std::net::SocketAddr) -> Handed {
    let (sender, receiver) = mpsc::unbounded_channel();
    let hand_off: HandOff = std::sync::Arc::new(move |stream: std::net::TcpStream| {
        sender.send(stream).map_err(|refused| refused.0)
    });
    local.serve(address, hand_off);
    receiver
}

/// A handed-in connection on this runtime, with its peer's address (the
/// workspace's own loopback).
pub(crate) fn to_tokio(
    stream: std::net::TcpStream,
) -> Option<(tokio::net::TcpStream, std::net::SocketAddr)> {
    let peer = stream.peer_addr().ok()?;
    stream.set_nonblocking(true).ok()?;
    let stream = tokio::net::TcpStream::from_std(stream).ok()?;
    // Small writes leave at once (see the plain listener).
    let _ = stream.set_nodelay(true);
    Some((stream, peer))
}

/// How long open connections get to finish at shutdown.
const DRAIN: Duration = Duration::from_secs(10);

/// Serves `app`, as the plain listener does, on the connections handed in
/// to its address, until `stop` turns true.
pub(crate) async fn serve_plain(
    mut handed: Handed,
    app: Router,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        if *stop.borrow() {
            break;
        }
        let stream = tokio::select! {
            handed = handed.recv() => match handed {
                Some(stream) => stream,
                None => break,
            },
            _ = stop.changed() => break,
        };
        let Some((stream, peer)) = to_tokio(stream) else {
            continue;
        };
        let (app, watcher) = (app.clone(), graceful.watcher());
        tokio::spawn(crate::connection::serve(stream, peer, app, false, watcher));
    }
    drop(handed);
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!("handed-in connections still open at shutdown were closed");
    }
    Ok(())
}
