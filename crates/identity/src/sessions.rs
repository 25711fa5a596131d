//! Who is calling: logins, sessions, API tokens and logout.
//!
//! A login checks a password, which is the one expensive thing an anonymous
//! caller can make the server do, and the one thing worth guessing. So before
//! any check, the login throttle refuses a username or a client address that
//! failed too often in the last minute (429), and the check itself runs on the
//! bounded hashing pool (503 when it stays full). An unknown user's password
//! is checked against a dummy hash of the same cost, inside the same bound, so
//! timing tells nothing about which usernames exist.
//!
//! Tokens are bearer secrets kept only as their SHA-256. A session (from a
//! login) ends after the server's idle timeout or at its maximum lifetime,
//! whichever comes first, or when logged out; an API token (named, made by a
//! logged-in user) ends at its own expiry or when revoked, and has no idle
//! timeout. The policy is applied here at each use, from the stored times, so
//! a changed flag applies to existing sessions too.

use std::net::IpAddr;
use std::time::Duration;

use abode_store::{
    page_size, Credential, NewApiToken, Page, StoreError, TokenKind, TokenRecord, User,
};

use super::throttle::{whole_seconds_up, Refusal, ThrottleKey, INVALID_USERNAME};
use super::{Caller, Identity};
use crate::audit::audit_event;
use crate::authz::Action;
use crate::{secrets, validate_name, IdentityError};

/// The answer to a request made with an expired session.
pub const SESSION_EXPIRED: &str = "your session expired; log in again (abode login)";

/// How often at most a token's last use is written: every request
/// authenticates, and most requests should stay reads.
const TOUCH_INTERVAL: Duration = Duration::from_secs(60);

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl Identity {
    /// Logs a user in with a password; `client` is the caller's address for
    /// the throttle (none: only the username is throttled).
    pub async fn login_from(
        &self,
        username: &str,
        password: &str,
        client: Option<IpAddr>,
        request_id: Option<String>,
    ) -> Result<(User, String), IdentityError> {
        if !self.config.password_login {
            let instead = match self.sign_in_methods().oidc {
                Some(text) => format!("sign in with {text} instead (abode login URL opens it)"),
                None => "ask the server's operator".to_string(),
            };
            return Err(IdentityError::Forbidden(format!(
                "password sign-in is turned off on this server; {instead}"
            )));
        }
        let mut keys = vec![ThrottleKey::username(username)];
        keys.extend(client.map(ThrottleKey::Address));
        if let Some(refusal) = self.throttle.check(&keys, self.clock.now_ms()) {
            return Err(self.throttled(refusal, request_id).await);
        }
        let user = match self.store.user_by_name(username).await {
            // A system actor's account is nobody's to log in to.
            Ok(user) if user.system => None,
            Ok(user) => Some(user),
            Err(StoreError::NotFound(_)) => None,
            Err(other) => return Err(other.into()),
        };
        // An unknown user, and an account without a password (single
        // sign-on's), cost a check against the dummy hash: the same work, in
        // the same bounded pool, as a real one, so timing tells no username.
        let has_password = user
            .as_ref()
            .is_some_and(|user| !user.password_hash.is_empty());
        let stored = match &user {
            Some(user) if has_password => user.password_hash.clone(),
            _ => secrets::DUMMY_PASSWORD_HASH.to_string(),
        };
        let password = password.to_string();
        let matches = has_password
            & self
                .hashing
                .run(move |memory| secrets::verify_password(&password, &stored, memory))
                .await?;
        let user = match user {
            Some(user) if matches => user,
            user => {
                self.throttle.failed(&keys, self.clock.now_ms());
                // What is not a valid name may be a password typed into the
                // wrong field: the audit log does not keep it.
                let target = match &keys[0] {
                    ThrottleKey::Username(name) => name.as_str(),
                    ThrottleKey::Address(_) => INVALID_USERNAME,
                };
                self.audit
                    .record(&audit_event(
                        user.as_ref(),
                        request_id,
                        "login",
                        "user",
                        target,
                        "failure",
                        from_client(client),
                    ))
                    .await;
                return Err(IdentityError::Unauthorized(
                    "wrong username or password".into(),
                ));
            }
        };
        self.throttle.succeeded(username);
        if !user.status.may_sign_in() {
            self.audit
                .record(&audit_event(
                    Some(&user),
                    request_id,
                    "login",
                    "user",
                    username,
                    "failure",
                    Some(format!(
                        "{} account={}",
                        from_client(client).unwrap_or_default(),
                        user.status
                    )),
                ))
                .await;
            return Err(super::accounts::refused(user.status));
        }
        self.seen(&user).await?;
        let token = self.issue_token(&user, request_id.clone()).await?;
        self.audit
            .record(&audit_event(
                Some(&user),
                request_id,
                "login",
                "user",
                username,
                "success",
                from_client(client),
            ))
            .await;
        Ok((user, token))
    }

    /// Logs a user in with a password, throttled by username only.
    pub async fn login(
        &self,
        username: &str,
        password: &str,
        request_id: Option<String>,
    ) -> Result<(User, String), IdentityError> {
        self.login_from(username, password, None, request_id).await
    }

    /// The refusal of a throttled login, audited once per window and key.
    async fn throttled(&self, refusal: Refusal, request_id: Option<String>) -> IdentityError {
        let seconds = whole_seconds_up(refusal.retry_after);
        let (target_type, target, whose) = match &refusal.key {
            ThrottleKey::Username(name) => ("user", name.clone(), "for this username"),
            ThrottleKey::Address(address) => ("address", address.to_string(), "from this address"),
        };
        if refusal.first {
            self.audit
                .record(&audit_event(
                    None,
                    request_id,
                    "login.throttle",
                    target_type,
                    &target,
                    "failure",
                    Some(format!(
                        "{} failed logins within {} s; logins refused for {seconds} s",
                        self.throttle.limit,
                        self.throttle.window.as_secs()
                    )),
                ))
                .await;
        }
        IdentityError::Throttled {
            message: format!("too many failed logins {whose}; try again in {seconds} s"),
            retry_after_seconds: seconds,
        }
    }

    /// A new session for `user`.
    pub(super) async fn issue_token(
        &self,
        user: &User,
        request_id: Option<String>,
    ) -> Result<String, IdentityError> {
        let token = secrets::new_session_token();
        self.store
            .create_token(&user.id, &secrets::token_hash(&token))
            .await?;
        self.audit
            .record(&audit_event(
                Some(user),
                request_id,
                "token.create",
                "user",
                &user.username,
                "success",
                None,
            ))
            .await;
        Ok(token)
    }

    /// The user a session or API token belongs to, if the token is still good.
    pub async fn authenticate(&self, token: &str) -> Result<User, IdentityError> {
        Ok(self.token_owner(token).await?.1)
    }

    /// The caller a session or API token stands for: its user and the roles
    /// they hold now (a role change takes effect on the next request).
    pub async fn authenticate_caller(
        &self,
        token: &str,
        request_id: Option<String>,
    ) -> Result<Caller, IdentityError> {
        let credential = self.credential(token).await?;
        Ok(Caller {
            user: credential.user,
            roles: credential.roles,
            request_id,
            token_name: credential.token.name,
            scope: credential.token.scope,
        })
    }

    /// The caller a credential of another kind names by user id (an app's
    /// session, docs/apps.md): 401 once the account may not sign in.
    pub async fn caller_of_user(
        &self,
        user_id: &str,
        request_id: Option<String>,
    ) -> Result<Caller, IdentityError> {
        let user = match self.store.user_by_id(user_id).await {
            Ok(user) => user,
            Err(StoreError::NotFound(_)) => {
                return Err(IdentityError::Unauthorized("no such account".into()))
            }
            Err(other) => return Err(other.into()),
        };
        if !user.status.may_sign_in() {
            return Err(super::accounts::refused(user.status));
        }
        let roles = self.store.roles_of(user_id).await?;
        Ok(Caller {
            user,
            roles,
            request_id,
            token_name: None,
            scope: crate::authz::TokenScope::all(),
        })
    }

    /// The token's record and user; 401 for an unknown, revoked or expired
    /// token. Records the use.
    async fn token_owner(&self, token: &str) -> Result<(TokenRecord, User), IdentityError> {
        let credential = self.credential(token).await?;
        Ok((credential.token, credential.user))
    }

    /// The token's record, user and roles (one query); 401 for an unknown,
    /// revoked or expired token. Records the use.
    pub(crate) async fn credential(&self, token: &str) -> Result<Credential, IdentityError> {
        let credential = match self
            .store
            .credential_by_hash(&secrets::token_hash(token))
            .await
        {
            Ok(credential) => credential,
            Err(StoreError::NotFound(_)) => {
                return Err(IdentityError::Unauthorized(
                    "invalid session token; log in again".into(),
                ))
            }
            Err(other) => return Err(other.into()),
        };
        // The account first: a deleted one's tokens were all revoked, and
        // it is told why.
        if !credential.user.status.may_sign_in() {
            return Err(super::accounts::refused(credential.user.status));
        }
        let record = &credential.token;
        let now = self.clock.now_ms();
        let config = &self.config;
        let touch_interval = match record.kind {
            TokenKind::Session => {
                if record.revoked_at.is_some() {
                    return Err(IdentityError::Unauthorized(
                        "this session was logged out; log in again".into(),
                    ));
                }
                let last_use = record
                    .last_used_at
                    .unwrap_or(record.created_at)
                    .max(record.created_at);
                let too_old = now
                    >= record
                        .created_at
                        .saturating_add(millis(config.session_max_lifetime));
                let idle = now >= last_use.saturating_add(millis(config.session_idle_timeout));
                if too_old || idle {
                    return Err(IdentityError::Unauthorized(SESSION_EXPIRED.into()));
                }
                // The idle timeout is measured from the last recorded use:
                // record it often enough that a short timeout stays accurate.
                TOUCH_INTERVAL.min(config.session_idle_timeout / 4)
            }
            TokenKind::Api => {
                if record.revoked_at.is_some() {
                    return Err(IdentityError::Unauthorized(
                        "this API token was revoked".into(),
                    ));
                }
                if record.expires_at.is_some_and(|at| now >= at) {
                    return Err(IdentityError::Unauthorized(
                        "this API token expired; create a new one (abode tokens create)".into(),
                    ));
                }
                TOUCH_INTERVAL
            }
        };
        // Most requests find a recent enough use already recorded: they stay
        // reads (on SQLite a write, even one that changes nothing, takes the
        // database's one write lock).
        let not_since = now.saturating_sub(millis(touch_interval));
        if record.last_used_at.is_none_or(|used| used < not_since) {
            self.store.touch_token(&record.id, now, not_since).await?;
        }
        self.seen(&credential.user).await?;
        Ok(credential)
    }

    /// Ends the session (or API token) the request was made with: from now on
    /// it gets 401.
    pub async fn logout(
        &self,
        token: &str,
        request_id: Option<String>,
    ) -> Result<(), IdentityError> {
        let (record, user) = self.token_owner(token).await?;
        self.store
            .revoke_token(&record.id, self.clock.now_ms())
            .await?;
        self.revoked();
        self.audit
            .record(&audit_event(
                Some(&user),
                request_id,
                "logout",
                "user",
                &user.username,
                "success",
                Some(format!("token={}", record.kind)),
            ))
            .await;
        Ok(())
    }

    /// Makes a named API token for the user of the session `token`; returns
    /// its record and the token itself, which is never shown again. Refused
    /// with an API token: a token that could make tokens would outlive any
    /// lifetime cap.
    pub async fn create_api_token(
        &self,
        token: &str,
        request_id: Option<String>,
        name: &str,
        lifetime: Option<Duration>,
        scope: crate::authz::TokenScope,
    ) -> Result<(TokenRecord, String), IdentityError> {
        let (record, user) = self.token_owner(token).await?;
        if record.kind != TokenKind::Session {
            return Err(IdentityError::Forbidden(
                "an API token cannot create API tokens; log in with your password (abode login)"
                    .into(),
            ));
        }
        validate_name("token name", name)?;
        let cap = self.config.api_token_max_lifetime;
        let lifetime = lifetime.unwrap_or(cap);
        if lifetime.is_zero() {
            return Err(IdentityError::BadRequest(
                "the token lifetime must be at least 1 second".into(),
            ));
        }
        if lifetime > cap {
            return Err(IdentityError::BadRequest(format!(
                "the token lifetime may be at most {} s on this server (--api-token-max-lifetime)",
                cap.as_secs()
            )));
        }
        let secret = secrets::new_api_token();
        let created = match self
            .store
            .create_api_token(&NewApiToken {
                user_id: user.id.clone(),
                name: name.to_string(),
                token_hash: secrets::token_hash(&secret),
                expires_at: self.clock.now_ms().saturating_add(millis(lifetime)),
                scope: scope.clone(),
            })
            .await
        {
            Ok(created) => created,
            Err(StoreError::Conflict(_)) => {
                return Err(IdentityError::Conflict(format!(
                    "you already have an API token named \"{name}\"; revoke it or pick another name"
                )))
            }
            Err(other) => return Err(other.into()),
        };
        self.audit
            .record(&audit_event(
                Some(&user),
                request_id,
                "api_token.create",
                "user",
                &user.username,
                "success",
                Some(format!(
                    "name={name} lifetime_seconds={} scope={scope}",
                    lifetime.as_secs()
                )),
            ))
            .await;
        Ok((created, secret))
    }

    /// The caller's API tokens that are not revoked (expired ones included),
    /// by name.
    pub async fn api_tokens(
        &self,
        caller: &Caller,
        after: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Page<TokenRecord>, IdentityError> {
        caller.authorize(Action::TokenList, Some(&caller.user.id))?;
        Ok(self
            .store
            .list_api_token_page(&caller.user.id, after, page_size(limit))
            .await?)
    }

    /// Revokes the caller's API token `name`: from now on it gets 401.
    pub async fn revoke_api_token(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<TokenRecord, IdentityError> {
        caller.authorize(Action::TokenRevoke, Some(&caller.user.id))?;
        let revoked = match self
            .store
            .revoke_api_token(&caller.user.id, name, self.clock.now_ms())
            .await
        {
            Ok(revoked) => revoked,
            Err(StoreError::NotFound(_)) => {
                return Err(IdentityError::NotFound(format!(
                    "you have no API token named \"{name}\""
                )))
            }
            Err(other) => return Err(other.into()),
        };
        self.revoked();
        self.audit
            .record(&audit_event(
                Some(&caller.user),
                caller.request_id.clone(),
                "api_token.revoke",
                "user",
                &caller.user.username,
                "success",
                Some(format!("name={name}")),
            ))
            .await;
        Ok(revoked)
    }
}

/// A login's audit details: the client's address (behind a trusted proxy,
/// the one it forwarded for), so that an investigation sees who tried.
/// The audit details of a password sign-in: its method, and the client's
/// address when known (the event's own columns keep it too).
fn from_client(client: Option<IpAddr>) -> Option<String> {
    Some(match client {
        Some(address) => format!("method=password from {address}"),
        None => "method=password".to_string(),
    })
}
