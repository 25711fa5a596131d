//! The real client of every request, resolved once: the socket's peer, or,
//! when that peer is a trusted proxy (`--trusted-proxies`), the client it
//! forwards for (the rule is [`abode_control::client_address`]'s). Handlers
//! read the [`ClientAddress`] extension, never `ConnectInfo` or the
//! forwarding headers themselves: the login throttle, the audit log and the
//! dashboard's `Secure` cookies then agree on who the client is.

use std::net::SocketAddr;
use std::sync::Arc;

use abode_control::client_address::TrustedProxies;
use abode_control::ClientAddress;
use axum::extract::{ConnectInfo, Request};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::Router;

/// Set by the HTTPS listener on each of its requests: the client's own
/// connection is TLS.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OverTls;

/// `app`, with a [`ClientAddress`] in every request that has a peer. The
/// outermost layer, so that everything inside (the redirect to the access
/// URL too) sees it.
pub(crate) fn layer(app: Router, trusted: TrustedProxies) -> Router {
    let trusted = Arc::new(trusted);
    app.layer(axum::middleware::from_fn(
        move |mut request: Request, next: Next| {
            let trusted = trusted.clone();
            async move {
                if let Some(client) = resolve(&trusted, &request) {
                    request.extensions_mut().insert(client);
                }
                next.run(request).await
            }
        },
    ))
}

fn resolve(trusted: &TrustedProxies, request: &Request) -> Option<ClientAddress> {
    let ConnectInfo(peer) = request.extensions().get::<ConnectInfo<SocketAddr>>()?;
    let over_tls = request.extensions().get::<OverTls>().is_some();
    let headers = request.headers();
    Some(trusted.resolve(
        peer.ip(),
        over_tls,
        values(headers, "x-forwarded-for"),
        values(headers, "x-forwarded-proto"),
    ))
}

/// A header's values in order; one that is not text reads as empty, which
/// the rule treats as garbage (it stops the walk, it is not skipped).
fn values<'a>(headers: &'a HeaderMap, name: &str) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(name)
        .iter()
        .map(|value| value.to_str().unwrap_or(""))
}
