//! What every handler of the dashboard shares ([`WebState`]), in a module
//! that names no page: the crate's root builds it with the router, and every
//! page and the session's extractor take it from here.

use abode_control::Control;
use abode_gateway::Gateway;

/// What every handler of the dashboard shares.
#[derive(Clone)]
pub(crate) struct WebState {
    pub(crate) control: Control,
    /// Apps' addresses and what a terminal's connection would be refused for.
    pub(crate) gateway: Gateway,
    /// Cookies get `Secure`: the server is reached over TLS (its access URL
    /// is `https://`, typically through a TLS-terminating proxy).
    pub(crate) secure_cookies: bool,
}

impl WebState {
    /// Whether this answer's cookies get `Secure`: always with an `https://`
    /// access URL, and also when this client came over TLS (the HTTPS
    /// listener, or a trusted proxy's `X-Forwarded-Proto: https`), so that a
    /// cookie set over TLS is never sent back in the clear.
    pub(crate) fn secure_for(&self, client: Option<&abode_control::ClientAddress>) -> bool {
        self.secure_cookies || client.is_some_and(|client| client.https)
    }

    /// [`secure_for`](Self::secure_for) the client of these extensions.
    pub(crate) fn secure_for_request(&self, extensions: &axum::http::Extensions) -> bool {
        self.secure_for(extensions.get::<abode_control::ClientAddress>())
    }
}
