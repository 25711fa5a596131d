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
//! and nothing else).
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
mod error;
mod groups;
mod names;
mod oidc;
mod quotas;
mod recovery;
mod sessions;
mod throttle;
mod users;

use std::time::Duration;

use abode_clock::Clock;
use abode_credentials::hashing::{self, HashingPool};
use abode_store::{Store, User};

pub use abode_authz as authz;
use abode_credentials::secrets;
pub use accounts::StatusCommand;
pub use actors::Actor;
use audit::Audit;
pub use error::IdentityError;
pub use groups::GroupEdit;
pub use names::validate_name;
pub use oidc::{OidcFinished, OidcStart, SignInMethods};
pub use sessions::SESSION_EXPIRED;
use throttle::LoginThrottle;

/// How logins, sessions and API tokens behave; the defaults fit one machine.
#[derive(Debug, Clone)]
pub struct IdentityConfig {
    /// A session ends after this long without a request...
    pub session_idle_timeout: Duration,
    /// ...and this long after its login, whatever its use.
    pub session_max_lifetime: Duration,
    /// The longest (and default) lifetime of an API token.
    pub api_token_max_lifetime: Duration,
    /// Failed logins per username or client address within a minute after
    /// which logins are refused until the minute ends; 0: no limit.
    pub login_failures_per_minute: u32,
    /// Single sign-on starts and callbacks per client address within a
    /// minute after which more are refused until the minute ends (each start
    /// keeps a pending sign-in and asks the provider); 0: no limit.
    pub oidc_attempts_per_minute: u32,
    /// Threads that hash and check passwords (each uses ~19 MiB while it does).
    pub hashing_threads: usize,
    /// How long a password request waits for a hashing thread before it is
    /// refused as busy.
    pub hashing_wait: Duration,
    /// People may sign in with a password (`--disable-password-auth` turns
    /// it off; the first user and the server's recovery commands still set
    /// passwords).
    pub password_login: bool,
    /// Single sign-on through an OpenID provider (`--oidc-*`).
    pub oidc: Option<abode_oidc::OidcConfig>,
}

impl Default for IdentityConfig {
    fn default() -> IdentityConfig {
        IdentityConfig {
            session_idle_timeout: Duration::from_secs(24 * 60 * 60),
            session_max_lifetime: Duration::from_secs(30 * 24 * 60 * 60),
            api_token_max_lifetime: Duration::from_secs(365 * 24 * 60 * 60),
            login_failures_per_minute: 10,
            oidc_attempts_per_minute: 30,
            hashing_threads: hashing::default_threads(),
            hashing_wait: Duration::from_secs(2),
            password_login: true,
            oidc: None,
        }
    }
}

/// Accounts, roles, logins, sessions and API tokens.
pub struct Identity {
    store: Store,
    clock: Clock,
    config: IdentityConfig,
    audit: Audit,
    /// Failed logins per username and client address.
    throttle: LoginThrottle,
    /// Single sign-on attempts per client address.
    oidc_throttle: LoginThrottle,
    /// Where passwords are hashed and checked, a few at a time.
    hashing: HashingPool,
    /// Counts the tokens this process revoked (logouts, revoked API
    /// tokens): what outlives its request on a token (the dashboard's live
    /// log) looks again at its token when it moves, instead of running on
    /// until its own wait ends.
    revocations: tokio::sync::watch::Sender<u64>,
    /// The OpenID provider, when single sign-on is on.
    oidc: Option<oidc::Oidc>,
}

impl Identity {
    /// Completes the audit events the request `request_id` recorded with
    /// what only the API knows of it: the client's address, its user agent
    /// and the answer's status.
    pub async fn complete_request_audit(
        &self,
        request_id: &str,
        client: Option<&str>,
        user_agent: Option<&str>,
        status: i64,
    ) -> Result<(), abode_store::StoreError> {
        self.store
            .complete_audit(request_id, client, user_agent, status)
            .await
            .map(|_| ())
    }

    /// `clock` is the one the store stamps with: session times are compared
    /// with the stored ones.
    pub fn new(store: Store, clock: Clock, config: IdentityConfig) -> Identity {
        let throttle =
            LoginThrottle::new(config.login_failures_per_minute, Duration::from_secs(60));
        let oidc_throttle =
            LoginThrottle::new(config.oidc_attempts_per_minute, Duration::from_secs(60));
        let hashing = HashingPool::new(config.hashing_threads, config.hashing_wait);
        let oidc = config.oidc.clone().map(|settings| oidc::Oidc {
            provider: abode_oidc::Provider::new(settings),
            pending: abode_oidc::Pending::new(oidc::StorePending(store.clone())),
        });
        Identity {
            audit: Audit::new(store.clone()),
            store,
            clock,
            config,
            throttle,
            oidc_throttle,
            hashing,
            revocations: tokio::sync::watch::Sender::new(0),
            oidc,
        }
    }

    /// Changes each time this process revokes a token: a long-lived answer
    /// made for a token checks it again then (and, for a revocation on
    /// another server, at its own next step).
    pub fn revocations(&self) -> tokio::sync::watch::Receiver<u64> {
        self.revocations.subscribe()
    }

    fn revoked(&self) {
        self.revocations
            .send_modify(|count| *count = count.wrapping_add(1));
    }

    pub fn config(&self) -> &IdentityConfig {
        &self.config
    }
}

/// Who is asking, for permission checks and the audit log: the user and the
/// roles read when the request authenticated (see
/// [`Identity::authenticate_caller`]).
#[derive(Debug, Clone)]
pub struct Caller {
    pub user: User,
    pub roles: authz::Roles,
    pub request_id: Option<String>,
}

impl Caller {
    /// What [`authz::authorize`] decides for.
    pub fn subject(&self) -> authz::Subject {
        authz::Subject::user(self.user.id.clone(), self.roles.clone())
    }

    /// Whether the caller may do `action` on an object owned by
    /// `object_owner` (a user id; `None`: nobody's, or everyone's).
    pub fn authorize(
        &self,
        action: authz::Action,
        object_owner: Option<&str>,
    ) -> Result<(), authz::Denied> {
        authz::authorize(&self.subject(), action, object_owner)
    }
}
