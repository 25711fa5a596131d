//! `--redirect-to-access-url`: the plain HTTP listener sends people and
//! clients to the access URL (`https://...`), keeping the path and query.
//!
//! Three things stay on plain HTTP, because what calls them does not follow
//! redirects or must not leave the machine: health and readiness (probes
//! that may not speak TLS), and the state backend of the builds this server
//! runs itself, which their Terraform reaches on loopback
//! (`/api/v1/builds/{id}/state...`). A redirect is 308, so a client's
//! method and body are kept. A request that a trusted proxy says came over
//! https (`--trusted-proxies`, `X-Forwarded-Proto`) is served, not sent
//! back to the proxy in a loop.

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;

/// `app`, with every request but the ones named above redirected.
pub(crate) fn to_access_url(app: Router, access_url: &str) -> Router {
    let base = access_url.trim_end_matches('/').to_string();
    app.layer(axum::middleware::from_fn(
        move |request: Request, next: Next| {
            let base = base.clone();
            async move {
                // Already https at a trusted proxy in front of this plain
                // listener: redirecting would loop.
                let proxied_https = request
                    .extensions()
                    .get::<abode_control::ClientAddress>()
                    .is_some_and(|client| client.https);
                if proxied_https || stays_plain(request.uri().path()) {
                    return next.run(request).await;
                }
                let target = match request.uri().path_and_query() {
                    Some(path) => format!("{base}{path}"),
                    None => format!("{base}/"),
                };
                redirect(&target)
            }
        },
    ))
}

pub fn stays_plain(path: &str) -> bool {
    if matches!(path, "/api/v1/health" | "/api/v1/ready") {
        return true;
    }
    // /api/v1/builds/{id}/state, .../state/lock, .../state/unlock
    let Some(rest) = path.strip_prefix("/api/v1/builds/") else {
        return false;
    };
    let mut parts = rest.split('/');
    let (_build, what) = (parts.next(), parts.next());
    what == Some("state")
}

fn redirect(target: &str) -> Response {
    (
        StatusCode::PERMANENT_REDIRECT,
        [(header::LOCATION, target.to_string())],
    )
        .into_response()
}
