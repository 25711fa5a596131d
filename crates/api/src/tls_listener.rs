//! The server's HTTPS listener (`--tls-address`): every connection's TLS
//! handshake with the certificate current when it starts
//! ([`abode_tls::server::ServerCertificate`], re-read on change), then the
//! same router as the plain listener, HTTP/2 or HTTP/1.1 by ALPN, with
//! WebSocket upgrades (agent tunnels, `abode ssh`, port forwarding).
//!
//! axum's own `serve` takes plain TCP only; this is the same loop over
//! rustls. A handshake that stalls is dropped after [`HANDSHAKE_TIMEOUT`],
//! so that idle sockets cannot pile up; at shutdown the listener stops
//! accepting and open connections are asked to end (in-flight requests
//! finish, for up to [`DRAIN`]).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open connections get to finish at shutdown.
const DRAIN: Duration = Duration::from_secs(10);

/// Serves `app` over TLS on `listener`, and on the connections workspaces
/// hand in to its address (`handed`), until `stop` turns true.
pub(crate) async fn serve(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    app: Router,
    mut handed: crate::handed_in::Handed,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let acceptor = TlsAcceptor::from(config);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        if *stop.borrow() {
            break;
        }
        let (socket, peer) = tokio::select! {
            Some(handed) = handed.recv() => match crate::handed_in::to_tokio(handed) {
                Some(accepted) => accepted,
                None => continue,
            },
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: a moment later
                    // may be better; the listener itself is still fine.
                    tracing::warn!(%error, "cannot accept a TLS connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stop.changed() => break,
        };
        // Small writes leave at once (see the plain listener).
        let _ = socket.set_nodelay(true);
        let acceptor = acceptor.clone();
        let app = app.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let stream =
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(socket)).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(error)) => {
                        tracing::debug!(%peer, %error, "a TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "a TLS handshake timed out");
                        return;
                    }
                };
            crate::connection::serve(stream, peer, app, true, watcher).await;
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!("TLS connections still open at shutdown were closed");
    }
    Ok(())
}
