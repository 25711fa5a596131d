//! OpenID Connect sign-in, the protocol half (issue 30, docs/deployment.md
//! "Single sign-on with OpenID Connect").
//!
//! Organizations keep their people in an identity provider; this crate lets
//! Abode trust what one says about a person, and nothing it did not check.
//! It knows the provider's settings ([`config`]), talks to it (discovery,
//! its signing keys, the code exchange and userinfo: [`provider`]) through
//! ureq with Abode's one TLS trust ([`http`]), checks ID tokens
//! ([`verify`]), decides whether the person it names may come in
//! ([`admit`]), and keeps the authorization-code flow's pending state and
//! the CLI's one-time codes ([`pending`]). It knows no account, session or
//! database: the control plane's identity service turns an admitted person
//! into an account and a session, and stores the pending entries through
//! [`pending::PendingStore`].
//!
//! The protocol itself (discovery documents, JWKS, PKCE, JWT signatures) is
//! the `openidconnect` crate's; what is Abode's is which checks are required
//! and how a refusal is told.
//!
//! # Modules
//!
//! `config.rs` checks the `--oidc-*` flags (every mistake one line; an
//! `http://` issuer only on loopback; the callback is `ACCESS_URL` plus the
//! fixed `CALLBACK_PATH`). `provider.rs` is the provider over the network:
//! discovery once and again after a failure, the signing keys fetched again
//! when a token names a key id they lack, the authorization request with PKCE,
//! `state` and `nonce`, the code exchange, userinfo's claims added. `verify.rs`
//! is the ID token's checks (`openidconnect` does the cryptography; a signature
//! by a published key with an asymmetric algorithm, issuer, audience, expiry by
//! the server's clock, nonce; each refusal a `TokenRefusal`, with the audit
//! reason of the check it failed). `admit.rs` says
//! whether the person may come in (verified email, domains, allowed groups, a
//! username in Abode's rules). `pending.rs` keeps the flow's pending sign-ins
//! and the CLI's one-time codes over a `PendingStore` (the store's, keyed by
//! the SHA-256 of the state or code). `http.rs` is ureq with Abode's one TLS
//! trust. Tables of claims and of forged tokens (alg none, another key,
//! audience, expiry, nonce) are in `tests/verify.rs` and the modules' tests;
//! the real provider (oidc-provider on Node) in the end-to-end tests, honest
//! and hostile (its token endpoint answering with forged ID tokens). The
//! dashboard's `oidc.rs` serves `/api/v1/oidc/login` and the callback, and
//! binds a sign-in to its browser with a state cookie.
//!
//! # What it keeps
//!
//! - Nothing the provider says is trusted before it is checked: an ID token
//!   counts only after its signature (never `alg: none`, never HMAC keyed by
//!   the client secret), issuer, audience, expiry and the nonce of a pending
//!   sign-in held; a pending sign-in and a CLI code are taken at most once
//!   (`DELETE ... RETURNING`) and only before they expire.
//! - An account is found by the provider's issuer and subject, never by email;
//!   the client secret, codes, states, nonces and tokens reach no log, audit
//!   event, API answer or CLI output (the configuration's and the pending
//!   entry's `Debug` leave them out).
//! - The provider is reached only through `http.rs`: no HTTP client of the
//!   protocol library, no redirect followed, Abode's one TLS trust.

pub mod admit;
pub mod config;
pub mod http;
pub mod pending;
pub mod provider;
pub mod verify;

pub use admit::{admit, Admitted, Refusal};
pub use config::{ConfigError, ConfigErrors, GroupSync, OidcConfig, OidcSettings, CALLBACK_PATH};
pub use pending::{MemoryPending, Pending, PendingError, PendingLogin, PendingStore, ReturnTo};
pub use provider::{Provider, ProviderError, SignInError};
pub use verify::{Claims, TokenRefusal};
