//! The identity service itself, in a module that names none of the modules
//! that extend it: `Identity`'s state and settings (`IdentityConfig`), its
//! constructor, and `Caller`, who is asking. Accounts, sessions, groups,
//! quotas, single sign-on and recovery each add their methods to `Identity`
//! in a module of their own and take it from here; this module reaches only
//! what it holds (the audit writer, the throttle, the pending sign-ins).

use std::time::Duration;

use abode_authz as authz;
use abode_clock::Clock;
use abode_credentials::hashing::{self, HashingPool};
use abode_store::{Store, User};

use crate::audit::Audit;
use crate::pending::{Oidc, StorePending};
use crate::throttle::LoginThrottle;

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
    pub(crate) store: Store,
    pub(crate) clock: Clock,
    pub(crate) config: IdentityConfig,
    pub(crate) audit: Audit,
    /// Failed logins per username and client address.
    pub(crate) throttle: LoginThrottle,
    /// Single sign-on attempts per client address.
    pub(crate) oidc_throttle: LoginThrottle,
    /// Where passwords are hashed and checked, a few at a time.
    pub(crate) hashing: HashingPool,
    /// Counts the tokens this process revoked (logouts, revoked API
    /// tokens): what outlives its request on a token (the dashboard's live
    /// log) looks again at its token when it moves, instead of running on
    /// until its own wait ends.
    pub(crate) revocations: tokio::sync::watch::Sender<u64>,
    /// The OpenID provider, when single sign-on is on.
    pub(crate) oidc: Option<Oidc>,
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
        let oidc = config.oidc.clone().map(|settings| Oidc {
            provider: abode_oidc::Provider::new(settings),
            pending: abode_oidc::Pending::new(StorePending(store.clone())),
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

    /// Someone's access narrowed (a workspace's share removed, a member
    /// left a group): what is open on a credential checks again at once,
    /// as after a revocation.
    pub fn access_narrowed(&self) {
        self.revoked();
    }

    pub(crate) fn revoked(&self) {
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
    /// The API token's name, when the request came with one (the
    /// connection log names it beside its owner).
    pub token_name: Option<String>,
    /// The scope of the API token the request carried; `all` for a session.
    pub scope: authz::TokenScope,
}

impl Caller {
    /// What [`authz::authorize`] decides for.
    pub fn subject(&self) -> authz::Subject {
        authz::Subject::scoped(self.user.id.clone(), self.roles.clone(), self.scope.clone())
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

    /// [`Caller::authorize`] on the workspace `workspace_id` of
    /// `owner_id`, which the token's scope may name.
    pub fn authorize_workspace(
        &self,
        action: authz::Action,
        owner_id: &str,
        workspace_id: &str,
    ) -> Result<(), authz::Denied> {
        authz::authorize_workspace(&self.subject(), action, owner_id, workspace_id)
    }
}
