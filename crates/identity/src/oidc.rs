//! Sign-in through the organization's OpenID provider (`abode-oidc` holds
//! the protocol): the pending sign-in kept in the store, the account a
//! provider's person is (found by the provider's issuer and subject, made
//! on first sign-in when sign-ups are allowed, its email kept current), the
//! session it ends with (the same a password login gives), and the CLI's
//! one-time codes. Every outcome is audited as a `login` with
//! `method=oidc`; no code, token or secret is in any record.

use std::net::IpAddr;

use abode_oidc::pending::{local_path, loopback_host};
use abode_oidc::{Admitted, PendingError, Refusal, ReturnTo};
use abode_store::{NewUser, StoreError, User};

use crate::audit::audit_event;
use crate::authz::{Role, Roles};
use crate::pending::Oidc;
use crate::throttle::{whole_seconds_up, ThrottleKey};
use crate::{Identity, IdentityError};

/// How people may sign in to this server (the unauthenticated answer the
/// dashboard and `abode login` read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInMethods {
    pub password: bool,
    /// The OpenID button's text, when OpenID Connect is on.
    pub oidc: Option<String>,
}

/// Where a finished sign-in goes.
#[derive(Debug)]
pub enum OidcFinished {
    /// The dashboard: a new session, and the local path to go to.
    Session {
        user: User,
        token: String,
        path: String,
    },
    /// The CLI: a one-time code, sent to its loopback or shown to paste.
    Code {
        code: String,
        /// The CLI's loopback host and port, and its state to echo.
        loopback: Option<(String, u16, String)>,
    },
}

/// What the browser asked for, before it goes to the provider.
#[derive(Debug, Clone)]
pub enum OidcStart<'a> {
    Dashboard {
        redirect: Option<&'a str>,
    },
    CliLoopback {
        host: &'a str,
        port: u16,
        /// The CLI's random value, echoed with the code.
        state: &'a str,
    },
    CliPaste,
}

impl Identity {
    /// Which ways of signing in this server offers.
    pub fn sign_in_methods(&self) -> SignInMethods {
        SignInMethods {
            password: self.config.password_login,
            oidc: self
                .oidc
                .as_ref()
                .map(|oidc| oidc.provider.config().sign_in_text.clone()),
        }
    }

    fn oidc(&self) -> Result<&Oidc, IdentityError> {
        self.oidc.as_ref().ok_or_else(|| {
            IdentityError::NotFound(
                "single sign-on is not set up on this server (abode server --oidc-issuer-url)"
                    .into(),
            )
        })
    }

    /// Reads the provider's discovery document (at start: a wrong issuer
    /// shows in the log before anyone signs in). `None` when OIDC is off.
    pub async fn check_oidc_provider(&self) -> Option<Result<(), String>> {
        let oidc = self.oidc.as_ref()?;
        Some(
            oidc.provider
                .check()
                .await
                .map_err(|error| error.to_string()),
        )
    }

    /// Starts a sign-in: the provider's URL to send the browser to, and
    /// the state the callback must come back with (the dashboard binds it
    /// to the browser with a cookie).
    pub async fn oidc_begin(
        &self,
        start: OidcStart<'_>,
        client: Option<IpAddr>,
        request_id: Option<String>,
    ) -> Result<(String, String), IdentityError> {
        let oidc = self.oidc()?;
        self.oidc_attempt(client, request_id).await?;
        let return_to = match start {
            OidcStart::Dashboard { redirect } => ReturnTo::Dashboard {
                path: local_path(redirect),
            },
            OidcStart::CliLoopback { host, port, state } => {
                if !loopback_host(host) || port == 0 {
                    return Err(IdentityError::BadRequest(
                        "the CLI's callback must be on loopback (127.0.0.1, localhost or [::1]) with a port".into(),
                    ));
                }
                if !(16..=128).contains(&state.len())
                    || !state.bytes().all(|b| b.is_ascii_alphanumeric())
                {
                    return Err(IdentityError::BadRequest(
                        "the CLI's state is missing or not 16-128 letters and digits; run abode login again".into(),
                    ));
                }
                ReturnTo::CliLoopback {
                    host: host.to_string(),
                    port,
                    state: state.to_string(),
                }
            }
            OidcStart::CliPaste => ReturnTo::CliPaste,
        };
        let authorization = oidc
            .provider
            .begin(return_to)
            .await
            .map_err(unreachable_provider)?;
        oidc.pending
            .remember(
                &authorization.state,
                &authorization.login,
                self.clock.now_ms(),
            )
            .await
            .map_err(|error| match error {
                PendingError::Full => IdentityError::Busy {
                    message: error.to_string(),
                    retry_after_seconds: 60,
                },
                other => IdentityError::Internal(other.to_string()),
            })?;
        Ok((authorization.url, authorization.state))
    }

    /// Counts a single sign-on start or callback from `client`, refused once
    /// the address made `oidc_attempts_per_minute` within its minute: each
    /// start keeps a pending sign-in and asks the provider, so a flood from
    /// one address would fill the one and load the other. The first refusal
    /// of a window is audited (`login.throttle`, `method=oidc`).
    ///
    /// [`Identity::oidc_begin`] counts its own; the callback's route counts
    /// each callback first, before it looks at anything the request carries.
    pub async fn oidc_attempt(
        &self,
        client: Option<IpAddr>,
        request_id: Option<String>,
    ) -> Result<(), IdentityError> {
        let Some(address) = client else {
            return Ok(());
        };
        let keys = [ThrottleKey::Address(address)];
        let now = self.clock.now_ms();
        if let Some(refusal) = self.oidc_throttle.check(&keys, now) {
            let seconds = whole_seconds_up(refusal.retry_after);
            if refusal.first {
                self.audit
                    .record(&audit_event(
                        None,
                        request_id,
                        "login.throttle",
                        "address",
                        &address.to_string(),
                        "failure",
                        Some(format!(
                            "method=oidc {} sign-in attempts within {} s; refused for {seconds} s",
                            self.oidc_throttle.limit,
                            self.oidc_throttle.window.as_secs()
                        )),
                    ))
                    .await;
            }
            return Err(IdentityError::Throttled {
                message: format!(
                    "too many single sign-on attempts from this address; try again in {seconds} s"
                ),
                retry_after_seconds: seconds,
            });
        }
        self.oidc_throttle.failed(&keys, now);
        Ok(())
    }

    /// The callback: the pending sign-in of `state` (once), the provider's
    /// answer checked, the account found or made, and a session or a CLI
    /// code. Audited either way.
    pub async fn oidc_finish(
        &self,
        state: &str,
        code: Option<&str>,
        provider_error: Option<&str>,
        client: Option<IpAddr>,
        request_id: Option<String>,
    ) -> Result<OidcFinished, IdentityError> {
        let oidc = self.oidc()?;
        let now = self.clock.now_ms();
        let finished = self
            .oidc_admit(oidc, state, code, provider_error, now)
            .await;
        let (admitted, return_to) = match finished {
            Ok(found) => found,
            Err((reason, error, subject)) => {
                // A person the provider no longer lets in has no session
                // left either.
                if let Some(user) = subject {
                    self.end_everything(&user, reason, request_id.clone()).await;
                }
                self.audit_sign_in(None, "", "failure", reason, client, request_id)
                    .await;
                return Err(error);
            }
        };
        let user = match self.oidc_account(oidc, &admitted).await {
            Ok(user) => user,
            Err(error) => {
                self.audit_sign_in(
                    None,
                    &admitted.username,
                    "failure",
                    "account",
                    client,
                    request_id,
                )
                .await;
                return Err(error);
            }
        };
        // A suspended (or deleted) account stays out whatever the provider
        // says; a dormant one wakes.
        if !user.status.may_sign_in() {
            let reason = format!("account_{}", user.status);
            self.audit_sign_in(
                Some(&user),
                &user.username,
                "failure",
                &reason,
                client,
                request_id,
            )
            .await;
            return Err(crate::accounts::refused(user.status));
        }
        self.seen(&user).await?;
        // Group sync: the person's groups from the provider are set at each
        // sign-in (the groups people manage in Abode are left alone).
        if let (Some(names), Some(sync)) = (&admitted.groups, &oidc.provider.config().groups) {
            if let Err(error) = self.sync_groups(&user.id, names, sync.auto_create).await {
                self.audit_sign_in(
                    Some(&user),
                    &user.username,
                    "failure",
                    "group_sync",
                    client,
                    request_id,
                )
                .await;
                return Err(error);
            }
        }
        self.audit_sign_in(
            Some(&user),
            &user.username,
            "success",
            "",
            client,
            request_id.clone(),
        )
        .await;
        match return_to {
            ReturnTo::Dashboard { path } => {
                let token = self.issue_token(&user, request_id).await?;
                Ok(OidcFinished::Session { user, token, path })
            }
            ReturnTo::CliLoopback { host, port, state } => Ok(OidcFinished::Code {
                code: self.issue_code(oidc, &user, now).await?,
                loopback: Some((host, port, state)),
            }),
            ReturnTo::CliPaste => Ok(OidcFinished::Code {
                code: self.issue_code(oidc, &user, now).await?,
                loopback: None,
            }),
        }
    }

    async fn issue_code(
        &self,
        oidc: &Oidc,
        user: &User,
        now: i64,
    ) -> Result<String, IdentityError> {
        oidc.pending
            .issue_code(&user.id, now)
            .await
            .map_err(|error| IdentityError::Internal(error.to_string()))
    }

    /// The CLI's one-time code traded for a session (once, within minutes).
    pub async fn oidc_redeem_code(
        &self,
        code: &str,
        request_id: Option<String>,
    ) -> Result<(User, String), IdentityError> {
        let oidc = self.oidc()?;
        let user_id = oidc
            .pending
            .redeem_code(code, self.clock.now_ms())
            .await
            .map_err(|error| IdentityError::Internal(error.to_string()))?
            .ok_or_else(|| {
                IdentityError::Unauthorized(
                    "this sign-in code is unknown, already used or expired; run abode login again"
                        .into(),
                )
            })?;
        let user = self.store.user_by_id(&user_id).await?;
        // Suspended in the minutes since the browser's sign-in: still out.
        if !user.status.may_sign_in() {
            return Err(crate::accounts::refused(user.status));
        }
        let token = self.issue_token(&user, request_id).await?;
        Ok((user, token))
    }

    /// The person of the callback, or why not (with the linked account,
    /// when the refusal means their sessions must end).
    async fn oidc_admit(
        &self,
        oidc: &Oidc,
        state: &str,
        code: Option<&str>,
        provider_error: Option<&str>,
        now: i64,
    ) -> Result<(Admitted, ReturnTo), (&'static str, IdentityError, Option<User>)> {
        let login = match oidc.pending.take(state, now).await {
            Ok(Some(login)) => login,
            Ok(None) => {
                return Err((
                    "unknown_state",
                    IdentityError::BadRequest(abode_oidc::SignInError::UnknownState.to_string()),
                    None,
                ))
            }
            Err(error) => return Err(("store", IdentityError::Internal(error.to_string()), None)),
        };
        if let Some(said) = provider_error {
            let error = abode_oidc::SignInError::ProviderSaid(said.chars().take(200).collect());
            return Err((
                "provider_error",
                IdentityError::Forbidden(error.to_string()),
                None,
            ));
        }
        let Some(code) = code.filter(|code| !code.is_empty()) else {
            let error = abode_oidc::SignInError::NoCode;
            return Err((
                "no_code",
                IdentityError::BadRequest(error.to_string()),
                None,
            ));
        };
        match oidc.provider.finish(&login, code, now / 1000).await {
            Ok(admitted) => Ok((admitted, login.return_to)),
            Err(error) => {
                let reason = error.reason();
                // Left the allowed groups or domains at the provider: the
                // account they had here keeps no session.
                let linked = match &error {
                    abode_oidc::SignInError::Refused {
                        refusal: Refusal::NotInAllowedGroups | Refusal::DomainNotAllowed(_),
                        issuer,
                        subject,
                    } => self.store.user_by_oidc_subject(issuer, subject).await.ok(),
                    _ => None,
                };
                Err((reason, sign_in_error(error), linked))
            }
        }
    }

    /// The account of an admitted person: the linked one (its email kept
    /// current), or a new member when sign-ups are allowed.
    async fn oidc_account(&self, oidc: &Oidc, admitted: &Admitted) -> Result<User, IdentityError> {
        match self
            .store
            .user_by_oidc_subject(&admitted.issuer, &admitted.subject)
            .await
        {
            Ok(user) => {
                if user.email != admitted.email
                    && crate::users::validate_email(&admitted.email).is_ok()
                {
                    self.store.set_user_email(&user.id, &admitted.email).await?;
                    return Ok(self.store.user_by_id(&user.id).await?);
                }
                return Ok(user);
            }
            Err(StoreError::NotFound(_)) => {}
            Err(other) => return Err(other.into()),
        }
        if !oidc.provider.config().allow_signups {
            return Err(IdentityError::Forbidden(
                "no Abode account is linked to your identity provider account, and this server does not create accounts at sign-in; ask an administrator for access"
                    .into(),
            ));
        }
        crate::users::validate_email(&admitted.email)?;
        for attempt in 0..50u32 {
            let username = candidate(&admitted.username, attempt);
            if abode_store::SystemActor::by_username(&username).is_some() {
                continue;
            }
            let created = self
                .store
                .create_oidc_user(
                    &NewUser {
                        username: username.clone(),
                        email: admitted.email.clone(),
                        roles: Roles::from([Role::Member]),
                        // No password opens an account made by the provider.
                        password_hash: String::new(),
                    },
                    &admitted.issuer,
                    &admitted.subject,
                )
                .await;
            match created {
                Ok(user) => {
                    self.audit
                        .record(&audit_event(
                            Some(&user),
                            None,
                            "user.create",
                            "user",
                            &username,
                            "success",
                            Some("roles=member method=oidc".into()),
                        ))
                        .await;
                    return Ok(user);
                }
                Err(StoreError::Conflict("username")) => continue,
                // The same person signing in twice at once: the other made it.
                Err(StoreError::Conflict(_)) => {
                    return Ok(self
                        .store
                        .user_by_oidc_subject(&admitted.issuer, &admitted.subject)
                        .await?)
                }
                Err(other) => return Err(other.into()),
            }
        }
        Err(IdentityError::Conflict(format!(
            "no free username like \"{}\" was found; ask an administrator",
            admitted.username
        )))
    }

    /// Ends every session and API token of `user` (refused at sign-in now).
    async fn end_everything(&self, user: &User, reason: &str, request_id: Option<String>) {
        match self
            .store
            .end_user_tokens(&user.id, self.clock.now_ms())
            .await
        {
            Ok(ended) => {
                self.revoked();
                self.audit
                    .record(&audit_event(
                        Some(user),
                        request_id,
                        "user.tokens_end",
                        "user",
                        &user.username,
                        "success",
                        Some(format!("tokens_ended={ended} reason={reason} method=oidc")),
                    ))
                    .await;
            }
            Err(error) => tracing::error!(%error, "cannot end the sessions of a refused person"),
        }
    }

    async fn audit_sign_in(
        &self,
        user: Option<&User>,
        target: &str,
        outcome: &str,
        reason: &str,
        client: Option<IpAddr>,
        request_id: Option<String>,
    ) {
        let mut details = String::from("method=oidc");
        if !reason.is_empty() {
            details.push_str(&format!(" reason={reason}"));
        }
        if let Some(address) = client {
            details.push_str(&format!(" from {address}"));
        }
        self.audit
            .record(&audit_event(
                user,
                request_id,
                "login",
                "user",
                target,
                outcome,
                Some(details),
            ))
            .await;
    }
}

/// `name`, then `name-2`, `name-3`, ... within 64 characters.
fn candidate(name: &str, attempt: u32) -> String {
    if attempt == 0 {
        return name.to_string();
    }
    let suffix = format!("-{}", attempt + 1);
    let mut base: String = name.chars().take(64 - suffix.len()).collect();
    while base.ends_with('-') {
        base.pop();
    }
    format!("{base}{suffix}")
}

fn unreachable_provider(error: abode_oidc::ProviderError) -> IdentityError {
    tracing::warn!(%error, "the OpenID provider cannot be used");
    IdentityError::Busy {
        message: format!("the identity provider cannot be reached now; try again later ({error})"),
        retry_after_seconds: 30,
    }
}

fn sign_in_error(error: abode_oidc::SignInError) -> IdentityError {
    use abode_oidc::SignInError;
    match error {
        SignInError::Provider(error) => unreachable_provider(error),
        SignInError::Refused { refusal, .. } => IdentityError::Forbidden(refusal.to_string()),
        SignInError::UnknownState | SignInError::NoCode => {
            IdentityError::BadRequest(error.to_string())
        }
        other => {
            tracing::warn!(error = %other, "an OpenID sign-in was refused");
            IdentityError::Forbidden(format!("the sign-in was refused: {other}"))
        }
    }
}
