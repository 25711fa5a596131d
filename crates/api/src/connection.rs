//! One HTTP connection served with the router: HTTP/2 or HTTP/1.1 with
//! WebSocket upgrades, the client's address (and whether it came over TLS)
//! put where the handlers read them. The TLS listener and the connections
//! workspaces hand in share it; axum's own `serve` does this for the plain
//! listener.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tower::ServiceExt;

/// Serves one connection (TLS already done when `over_tls`) until it ends or
/// `watcher`'s shutdown asks it to.
pub(crate) async fn serve<I>(
    io: I,
    peer: std::net::SocketAddr,
    app: Router,
    over_tls: bool,
    watcher: hyper_util::server::graceful::Watcher,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = app.map_request(move |request: Request<Incoming>| {
        let mut request = request.map(Body::new);
        // The login throttle and the audit log read the client's address,
        // as on the plain listener.
        request.extensions_mut().insert(ConnectInfo(peer));
        if over_tls {
            // ... and whether it reached us over TLS (cookies get `Secure`).
            request
                .extensions_mut()
                .insert(crate::client_address::OverTls);
        }
        request
    });
    let service = TowerToHyperService::new(service);
    let builder = auto::Builder::new(TokioExecutor::new());
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    if let Err(error) = watcher.watch(connection.into_owned()).await {
        tracing::debug!(%peer, %error, "a connection ended with an error");
    }
}
