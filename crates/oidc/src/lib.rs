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
