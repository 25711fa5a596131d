//! `Strict-Transport-Security` (RFC 6797) on every answer a client got over
//! TLS: on the HTTPS listener, or at a trusted proxy that said so
//! (`X-Forwarded-Proto`). A browser that saw it once never speaks plain HTTP
//! to the server's name again for `max-age` seconds, so a network in the
//! middle cannot strip TLS off its next visit. Never sent on plain HTTP,
//! where RFC 6797 has browsers ignore it. `--hsts-max-age 0` leaves it out
//! (a test server whose name must keep answering plain HTTP).

use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::Router;

use abode_control::ClientAddress;

/// `app`, whose answers over TLS say to keep to TLS for `max_age` seconds
/// (none at 0).
pub(crate) fn layer(app: Router, max_age: u64) -> Router {
    let Some(value) = policy(max_age) else {
        return app;
    };
    app.layer(axum::middleware::from_fn(
        move |request: Request, next: Next| {
            let value = value.clone();
            async move {
                let https = request
                    .extensions()
                    .get::<ClientAddress>()
                    .is_some_and(|client| client.https);
                let mut response = next.run(request).await;
                if https {
                    response
                        .headers_mut()
                        .insert(header::STRICT_TRANSPORT_SECURITY, value);
                }
                response
            }
        },
    ))
}

/// The header's value for `max_age` seconds; `None` at 0.
pub fn policy(max_age: u64) -> Option<HeaderValue> {
    if max_age == 0 {
        return None;
    }
    HeaderValue::from_str(&format!("max-age={max_age}")).ok()
}
