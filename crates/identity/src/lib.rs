//! Identity: who may exist and who is calling. Accounts and roles
//! (`users.rs`), logins, sessions and API tokens (`sessions.rs`), the login
//! throttle (`throttle.rs`), groups and their sync (`groups.rs`).
//!
//! It is a service of its own, not methods on `Control`, so that it holds
//! only what it needs (the store, the clock, its settings, the hashing
//! pool, the throttle, an audit writer) and can grow
//! (other ways to log in, groups, suspension) without touching the rest of
//! the control plane. It alone checks people's passwords, sessions and API
//! tokens: every other domain is handed a [`Caller`] and asks the policy
//! table about it.
//!
//! # Modules
//!
//! Besides those: quotas (`quotas.rs`: a person's groups' allowances and their
//! workspaces' costs; a member asking for another's is refused before the name
//! is looked up), account status (`accounts.rs`: suspend, activate, delete, the
//! dormancy sweep the scheduler's tick calls, sightings that wake a dormant
//! account, a person's own password), single sign-on's accounts (`oidc.rs`: an
//! admitted person becomes the account linked to the provider's issuer and
//! subject, its status checked, its groups synced, a session or a CLI code),
//! the way back in for an owner locked out (`recovery.rs`: `abode server
//! create-admin-user` and `reset-password`, which build an `Identity` on the
//! database alone, with no server running), `Caller` (who asks, with the roles
//! read when the request authenticated), `Actor` (`actors.rs`: a person or a
//! system actor, `server`, `scheduler`, `prebuilds`; builds and audit events
//! record either), names of users, templates and workspaces (`names.rs`), and
//! the audit writer every domain service records through (`audit.rs`: the store
//! and nothing else), and who the client of a request is behind trusted
//! proxies (`client_address.rs`: the address the throttle counts against
//! and the audit log records).
//!
//! `Identity` itself, its settings and `Caller` are in `service.rs`, which the
//! modules above extend and which names none of them; what it holds for single
//! sign-on (the provider, the pending sign-ins in the store) is in
//! `pending.rs`. This root only declares the modules and re-exports.
//!
//! Group sync (`Identity::sync_groups`) sets a person's memberships of `oidc`
//! groups to exactly the names single sign-on gave, creating missing ones when
//! asked and ignoring unknown ones otherwise, leaves `manual` groups alone, in
//! one store transaction, audited as `group.sync` with before and after. The
//! built-in `Everyone` holds every person and cannot change.
//!
//! It holds a `Store` handle, the clock, its own `IdentityConfig` (session idle
//! timeout and lifetime, API token cap, login failures per minute, hashing
//! threads and wait), the hashing pool, the throttle and an audit writer; it
//! knows nothing of `Control`, templates or builds, and its errors
//! (`IdentityError`) map one to one onto the control plane's.
//!
//! # What it keeps
//!
//! - Only `Identity` checks people's passwords, sessions and API tokens; every
//!   other domain gets a `Caller` (`authenticate_caller`) and authorizes it
//!   with `authz` at its own entry. Machines' secrets (agent tokens,
//!   provisioner keys, state-lock secrets) are checked where they are used.
//! - An account's status is checked where its credential is, before anything
//!   else about the token: a suspended or deleted account opens nothing from
//!   its next request, and what outlives a request (a live log, a `connect`
//!   WebSocket) looks again at each revocation this process makes
//!   (`Identity::revocations`) and, for those made elsewhere, on its own timer.
//!   The last owner who can act is never suspended or deleted.
//! - A session ends after the idle timeout (24 h) or at its maximum lifetime
//!   (30 d), or at logout; an API token at its own expiry (capped by the
//!   server, 365 d) or when revoked, with no idle timeout. The policy is
//!   applied at each request from the stored times, so a changed flag applies
//!   to existing sessions. Only a session can create API tokens: a token that
//!   mints tokens would outlive any cap.
//! - Password guessing is throttled before any password is checked: after 10
//!   failed logins in a minute for one username or from one client address (the
//!   socket's peer; a forwarded address only from a `--trusted-proxies` peer),
//!   logins for it are refused (429, `Retry-After`) until the minute ends, and
//!   the throttling is audited once per window. The counts are in memory.

mod accounts;
mod actors;
pub mod audit;
pub mod client_address;
mod error;
mod groups;
mod names;
mod oidc;
mod pending;
mod quotas;
mod recovery;
mod service;
mod sessions;
mod throttle;
mod users;

pub use abode_authz as authz;
use abode_credentials::secrets;
pub use accounts::StatusCommand;
pub use actors::Actor;
pub use error::IdentityError;
pub use groups::GroupEdit;
pub use names::validate_name;
pub use oidc::{OidcFinished, OidcStart, SignInMethods};
pub use service::{Caller, Identity, IdentityConfig};
pub use sessions::SESSION_EXPIRED;
