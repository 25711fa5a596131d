//! External auth (docs/external-auth.md): the accounts people link so that
//! their workspaces clone and push as them. A link is an OAuth 2.0
//! authorization code flow with PKCE: the server makes the `state` (kept
//! only as its hash) and the verifier (kept sealed), the person grants
//! access at the provider, and the provider's redirect to
//! `/external-auth/{id}/callback` brings the code back, which the server
//! trades for tokens and keeps sealed (`abode_external_auth::cipher`),
//! bound to the person and the provider. Unlinking revokes them at the
//! provider.
//!
//! A workspace's agent asks for its owner's token when Git asks it for a
//! password ([`ExternalAuth::token_for_workspace`]): the token is opened,
//! refreshed first when it is about to expire, and handed out on the
//! record; it never goes through Terraform. Accounts that are suspended or
//! deleted lose their links, revoked at the provider
//! ([`closed_account_sweeper`]).
//!
//! It is a service of its own: it holds the store, the providers, the key
//! and the clock; nothing else reads or writes a token.

use std::collections::HashMap;
use std::sync::Arc;

use abode_external_auth::cipher::Owner;
pub use abode_external_auth::cipher::TokenCipher;
use abode_external_auth::oauth::{self, Tokens};
use abode_external_auth::Provider;
use abode_store::{ExternalAuthLink, PendingExternalAuth, Store, Workspace};
use tokio::sync::watch;

use crate::audit::{audit_event, Audit};
use crate::{secrets, Caller, Clock, ControlError};

/// How long a link may take from its start to the provider's redirect.
const LINK_TIMEOUT_MS: i64 = 10 * 60 * 1000;

/// The providers and the key a server has (`--external-auth-config`,
/// `--external-auth-key-file`).
#[derive(Debug, Clone, Default)]
pub struct ExternalAuthConfig {
    pub providers: Vec<Provider>,
    pub cipher: Option<Arc<TokenCipher>>,
}

/// A provider as a person sees it: whether they linked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkView {
    pub provider: String,
    pub kind: &'static str,
    pub linked: bool,
    /// When they linked it (ms); a new link has a newer one.
    pub linked_at: Option<i64>,
    /// When the access token expires (ms), when the provider said.
    pub expires_at: Option<i64>,
}

/// What a workspace's agent asks a token for.
#[derive(Debug, Clone, Copy)]
pub enum TokenFor<'a> {
    /// A provider by its id (`abode external-auth access-token ID`).
    Provider(&'a str),
    /// The provider that serves a Git URL (Git asking for a password).
    GitUrl(&'a str),
}

/// A token handed to a workspace's agent.
pub struct HandedToken {
    pub provider: String,
    /// What Git sends as the user name with it.
    pub username: &'static str,
    pub access_token: String,
    /// When it expires (ms), when the provider said.
    pub expires_at: Option<i64>,
}

impl std::fmt::Debug for HandedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandedToken")
            .field("provider", &self.provider)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// Whether a link's access token is to be refreshed before it is handed
/// out at `now`: it expires within a quarter of its lifetime, at most a
/// minute (a token of an hour is refreshed in its last minute, one of 20 s
/// in its last 5 s), or expired.
pub fn needs_refresh(link: &ExternalAuthLink, now: i64) -> bool {
    match link.expires_at {
        None => false,
        Some(expires_at) => {
            let lifetime = expires_at.saturating_sub(link.refreshed_at).max(0);
            let margin = (lifetime / 4).min(60_000);
            expires_at.saturating_sub(now) <= margin
        }
    }
}

/// A link's person and provider ids.
type LinkKey = (String, String);

/// Where a person goes to link an account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkStart {
    /// The provider's page: its authorization URL, or for the device flow
    /// its verification page.
    pub url: String,
    /// The device flow's code the person types there.
    pub user_code: Option<String>,
}

/// The accounts people link (cheap to clone: a device flow's poll runs on
/// a task of its own).
#[derive(Clone)]
pub struct ExternalAuth {
    store: Store,
    config: ExternalAuthConfig,
    clock: Clock,
    access_url: String,
    audit: Audit,
    client: oauth::Client,
    /// One refresh at a time per person and provider in this process: a
    /// provider that rotates refresh tokens takes each only once.
    refreshing: Arc<std::sync::Mutex<HashMap<LinkKey, Arc<tokio::sync::Mutex<()>>>>>,
    /// The device flows this server polls: a person's new one for a
    /// provider ends their last, and there are never more than
    /// [`MAX_DEVICE_POLLS`] at once.
    device_polls: Arc<std::sync::Mutex<HashMap<LinkKey, tokio::task::AbortHandle>>>,
    device_slots: Arc<tokio::sync::Semaphore>,
}

/// The most device flows one server polls at once.
const MAX_DEVICE_POLLS: usize = 32;
/// The longest a device flow is polled, whatever the provider says.
const MAX_DEVICE_SECONDS: u64 = 30 * 60;

impl ExternalAuth {
    pub fn new(
        store: Store,
        config: ExternalAuthConfig,
        clock: Clock,
        access_url: String,
    ) -> ExternalAuth {
        ExternalAuth {
            audit: Audit::new(store.clone()),
            store,
            config,
            clock,
            access_url,
            client: oauth::Client::new(),
            refreshing: Arc::new(std::sync::Mutex::new(HashMap::new())),
            device_polls: Arc::new(std::sync::Mutex::new(HashMap::new())),
            device_slots: Arc::new(tokio::sync::Semaphore::new(MAX_DEVICE_POLLS)),
        }
    }

    fn device_polls(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<LinkKey, tokio::task::AbortHandle>> {
        self.device_polls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Where a person links their accounts (the dashboard's page).
    pub fn link_page(&self) -> String {
        format!("{}/external-auth", self.access_url.trim_end_matches('/'))
    }

    /// The configured providers.
    pub fn providers(&self) -> &[Provider] {
        &self.config.providers
    }

    fn provider(&self, id: &str) -> Result<&Provider, ControlError> {
        self.config
            .providers
            .iter()
            .find(|provider| provider.id == id)
            .ok_or_else(|| {
                ControlError::NotFound(format!(
                    "external auth provider \"{id}\" is not configured on this server"
                ))
            })
    }

    fn cipher(&self) -> Result<&TokenCipher, ControlError> {
        self.config
            .cipher
            .as_deref()
            .ok_or_else(|| ControlError::Internal("external auth has providers but no key".into()))
    }

    /// Where a provider sends the person back.
    pub fn redirect_uri(&self, id: &str) -> String {
        format!(
            "{}/external-auth/{}/callback",
            self.access_url.trim_end_matches('/'),
            abode_sdk::percent_encode(id)
        )
    }

    /// Every provider, and whether `caller` linked it.
    pub async fn list(&self, caller: &Caller) -> Result<Vec<LinkView>, ControlError> {
        let links = self.store.external_auth_links_of(&caller.user.id).await?;
        Ok(self
            .config
            .providers
            .iter()
            .map(|provider| {
                let link = links.iter().find(|link| link.provider_id == provider.id);
                LinkView {
                    provider: provider.id.clone(),
                    kind: provider.kind.as_str(),
                    linked: link.is_some(),
                    linked_at: link.map(|link| link.linked_at),
                    expires_at: link.and_then(|link| link.expires_at),
                }
            })
            .collect())
    }

    /// The providers `user_id` linked.
    pub async fn linked_providers(&self, user_id: &str) -> Result<Vec<String>, ControlError> {
        Ok(self
            .store
            .external_auth_links_of(user_id)
            .await?
            .into_iter()
            .map(|link| link.provider_id)
            .collect())
    }

    /// Starts `caller`'s link of provider `id`: where they go. A provider
    /// with `device_flow` gets a device flow, polled by this server until
    /// the person grants access, refuses, or the code expires.
    pub async fn start_link(&self, caller: &Caller, id: &str) -> Result<LinkStart, ControlError> {
        let provider = self.provider(id)?;
        let cipher = self.cipher()?;
        if provider.device_flow {
            let key = (caller.user.id.clone(), provider.id.clone());
            // A person's new flow replaces their last: its slot comes back.
            if let Some(previous) = self.device_polls().remove(&key) {
                previous.abort();
            }
            let slot = Arc::clone(&self.device_slots)
                .try_acquire_owned()
                .map_err(|_| ControlError::Busy {
                    message: "too many device links are under way on this server; try again in a few minutes".into(),
                    retry_after_seconds: 60,
                })?;
            let (client, for_thread) = (self.client.clone(), provider.clone());
            let started = tokio::task::spawn_blocking(move || client.start_device(&for_thread))
                .await
                .map_err(|error| ControlError::Internal(error.to_string()))?
                .map_err(|error| ControlError::BadRequest(error.to_string()))?;
            let start = LinkStart {
                url: started
                    .verification_uri_complete
                    .clone()
                    .unwrap_or_else(|| started.verification_uri.clone()),
                user_code: Some(started.user_code.clone()),
            };
            let this = self.clone();
            let (user, provider) = (caller.user.clone(), provider.clone());
            let poll = tokio::spawn(async move {
                let _slot = slot;
                this.poll_device(user, provider, started).await
            });
            self.device_polls().insert(key, poll.abort_handle());
            return Ok(start);
        }
        let random = |_| ControlError::Internal("the system's random source failed".into());
        let state = oauth::random_value().map_err(random)?;
        let verifier = oauth::random_value().map_err(random)?;
        let owner = Owner {
            user_id: &caller.user.id,
            provider_id: id,
        };
        let sealed = cipher
            .seal(&verifier, owner)
            .map_err(|error| ControlError::Internal(error.to_string()))?;
        self.store
            .create_external_auth_pending(
                &secrets::sha256_hex(state.as_bytes()),
                &PendingExternalAuth {
                    user_id: caller.user.id.clone(),
                    provider_id: id.to_string(),
                    verifier: sealed,
                },
                self.clock.now_ms() + LINK_TIMEOUT_MS,
            )
            .await?;
        Ok(LinkStart {
            url: oauth::authorize_url(provider, &self.redirect_uri(id), &state, &verifier)
                .to_string(),
            user_code: None,
        })
    }

    /// Polls a device flow until the person granted access (the link is
    /// kept, as a code flow's), refused, or its codes expired; each end is
    /// audited.
    async fn poll_device(
        &self,
        user: abode_store::User,
        provider: Provider,
        started: oauth::DeviceStart,
    ) {
        let seconds = started.expires_in.min(MAX_DEVICE_SECONDS);
        let deadline = self
            .clock
            .now_ms()
            .saturating_add(i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX));
        let mut interval = started.interval.clamp(1, 60);
        let outcome = loop {
            tokio::time::sleep(std::time::Duration::from_secs(interval)).await;
            if self.clock.now_ms() > deadline {
                break Err("the code expired before access was granted".to_string());
            }
            let (client, for_thread, code) = (
                self.client.clone(),
                provider.clone(),
                started.device_code.clone(),
            );
            let polled =
                tokio::task::spawn_blocking(move || client.poll_device(&for_thread, &code)).await;
            match polled {
                Ok(Ok(oauth::DevicePoll::Pending)) => {}
                Ok(Ok(oauth::DevicePoll::SlowDown)) => interval = (interval + 5).min(60),
                Ok(Ok(oauth::DevicePoll::Granted(tokens))) => break Ok(tokens),
                Ok(Err(error)) => break Err(error.to_string()),
                Err(error) => break Err(error.to_string()),
            }
        };
        let linked = match (outcome, self.cipher()) {
            (Ok(tokens), Ok(cipher)) => {
                let now = self.clock.now_ms();
                match self.sealed_link(cipher, &user.id, &provider.id, &tokens, now, now) {
                    Ok(link) => self
                        .store
                        .put_external_auth_link(&link)
                        .await
                        .map_err(|error| error.to_string()),
                    Err(error) => Err(error.to_string()),
                }
            }
            (Ok(_), Err(error)) => Err(error.to_string()),
            (Err(reason), _) => Err(reason),
        };
        self.device_polls()
            .remove(&(user.id.clone(), provider.id.clone()));
        match linked {
            Ok(()) => {
                self.record(&user, "external_auth.link", &provider.id, "success", None)
                    .await
            }
            Err(reason) => {
                tracing::info!(provider = %provider.id, user = %user.username, %reason, "device flow link ended unlinked");
                self.record(
                    &user,
                    "external_auth.link",
                    &provider.id,
                    "failure",
                    Some(reason),
                )
                .await
            }
        }
    }

    /// The provider's redirect: trades `code` for tokens and keeps them for
    /// the person whose link `state` started. Answers that person's name.
    pub async fn finish_link(
        &self,
        id: &str,
        state: &str,
        code: &str,
    ) -> Result<String, ControlError> {
        let provider = self.provider(id)?.clone();
        let cipher = self.cipher()?;
        let pending = self
            .store
            .take_external_auth_pending(&secrets::sha256_hex(state.as_bytes()))
            .await?
            .filter(|pending| pending.provider_id == id)
            .ok_or_else(|| {
                ControlError::BadRequest(
                    "this link is unknown or expired (each works once, for 10 minutes): start it again with abode external-auth link"
                        .into(),
                )
            })?;
        let owner = Owner {
            user_id: &pending.user_id,
            provider_id: id,
        };
        let verifier = cipher
            .open(&pending.verifier, owner)
            .map_err(|error| ControlError::Internal(error.to_string()))?;
        let (client, redirect_uri, code) =
            (self.client.clone(), self.redirect_uri(id), code.to_string());
        let exchanged = {
            let provider = provider.clone();
            tokio::task::spawn_blocking(move || {
                client.exchange_code(&provider, &redirect_uri, &code, &verifier)
            })
            .await
            .map_err(|error| ControlError::Internal(error.to_string()))?
        };
        let user = self.store.user_by_id(&pending.user_id).await?;
        let tokens = match exchanged {
            Ok(tokens) => tokens,
            Err(error) => {
                self.record(
                    &user,
                    "external_auth.link",
                    id,
                    "failure",
                    Some(error.to_string()),
                )
                .await;
                return Err(ControlError::BadRequest(error.to_string()));
            }
        };
        let now = self.clock.now_ms();
        let link = self.sealed_link(cipher, &pending.user_id, id, &tokens, now, now)?;
        self.store.put_external_auth_link(&link).await?;
        self.record(&user, "external_auth.link", id, "success", None)
            .await;
        Ok(user.username)
    }

    /// Removes `caller`'s link of provider `id` and revokes its tokens at
    /// the provider (a failed revocation is said, the link is gone anyway).
    pub async fn unlink(&self, caller: &Caller, id: &str) -> Result<Option<String>, ControlError> {
        let provider = self.provider(id)?.clone();
        let Some(link) = self
            .store
            .delete_external_auth_link(&caller.user.id, id)
            .await?
        else {
            return Err(ControlError::NotFound(format!(
                "your {id} account is not linked"
            )));
        };
        let problem = self.revoke_link(provider, &link).await;
        self.record(
            &caller.user,
            "external_auth.unlink",
            id,
            "success",
            problem.clone(),
        )
        .await;
        Ok(problem)
    }

    /// A fresh access token of `workspace`'s owner, for its agent: the
    /// provider asked for (or serving the Git URL), refreshed first when it
    /// is about to expire. Handed out on the record (the provider and the
    /// workspace, never the token). A workspace only ever gets its own
    /// owner's token.
    pub async fn token_for_workspace(
        &self,
        workspace: &Workspace,
        wanted: TokenFor<'_>,
    ) -> Result<HandedToken, ControlError> {
        let provider = self.wanted(wanted)?;
        self.declared_by(workspace, provider).await?;
        let owner = self.store.user_by_id(&workspace.owner_id).await?;
        let target = format!("{}/{}", workspace.owner_name, workspace.name);
        if !owner.status.may_sign_in() {
            return Err(ControlError::Forbidden(format!(
                "{}'s account is {}: it hands out no token",
                owner.username, owner.status
            )));
        }
        let cipher = self.cipher()?;
        let handed = self.fresh_token(&owner.id, provider, cipher).await;
        let (outcome, details) = match &handed {
            Ok(_) => (
                "success",
                format!("provider={} to the workspace's agent", provider.id),
            ),
            Err(error) => ("failure", format!("provider={}: {error}", provider.id)),
        };
        let mut event = audit_event(
            Some(&owner),
            None,
            "external_auth.token",
            "workspace",
            &target,
            outcome,
            Some(details),
        );
        event.workspace_id = Some(workspace.id.clone());
        self.audit.record(&event).await;
        let (access_token, expires_at) = handed?;
        Ok(HandedToken {
            provider: provider.id.clone(),
            username: provider.kind.git_username(),
            access_token,
            expires_at,
        })
    }

    /// The user name Git sends with a token of the provider serving
    /// `git_url`, for a workspace whose template asks for it: nothing is
    /// opened, refreshed or handed out (Git asks for the user name first).
    pub async fn git_username_for_workspace(
        &self,
        workspace: &Workspace,
        git_url: &str,
    ) -> Result<(String, &'static str), ControlError> {
        let provider = self.wanted(TokenFor::GitUrl(git_url))?;
        self.declared_by(workspace, provider).await?;
        Ok((provider.id.clone(), provider.kind.git_username()))
    }

    fn wanted(&self, wanted: TokenFor<'_>) -> Result<&Provider, ControlError> {
        match wanted {
            TokenFor::Provider(id) => self.provider(id),
            TokenFor::GitUrl(url) => self
                .config
                .providers
                .iter()
                .find(|provider| provider.serves(url))
                .ok_or_else(|| {
                    ControlError::NotFound(format!(
                        "no external auth provider of this server serves {url:?}"
                    ))
                }),
        }
    }

    /// A workspace gets tokens only of the providers its template version
    /// asks for (`data "abode_external_auth"`, required or optional): a
    /// template's scripts never collect accounts it did not declare.
    async fn declared_by(
        &self,
        workspace: &Workspace,
        provider: &Provider,
    ) -> Result<(), ControlError> {
        let declared = self
            .store
            .template_version_external_auth(&workspace.template_version_id)
            .await?;
        if declared.iter().any(|need| need.provider == provider.id) {
            return Ok(());
        }
        Err(ControlError::Forbidden(format!(
            "the workspace's template does not ask for {0} accounts (data \"abode_external_auth\" \"{0}\"): it gets no {0} token",
            provider.id
        )))
    }

    /// `user_id`'s access token at `provider`, refreshed first when
    /// [`needs_refresh`] says.
    async fn fresh_token(
        &self,
        user_id: &str,
        provider: &Provider,
        cipher: &TokenCipher,
    ) -> Result<(String, Option<i64>), ControlError> {
        let owner = Owner {
            user_id,
            provider_id: &provider.id,
        };
        let open = |sealed: &str| {
            cipher
                .open(sealed, owner)
                .map_err(|error| ControlError::Internal(error.to_string()))
        };
        let link = self.link_of(user_id, provider).await?;
        if !needs_refresh(&link, self.clock.now_ms()) {
            return Ok((open(&link.access_token)?, link.expires_at));
        }
        let lock = {
            let mut refreshing = self
                .refreshing
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(
                refreshing
                    .entry((user_id.to_string(), provider.id.clone()))
                    .or_default(),
            )
        };
        let _one_at_a_time = lock.lock().await;
        // Another request may have refreshed it while this one waited.
        let link = self.link_of(user_id, provider).await?;
        let now = self.clock.now_ms();
        if !needs_refresh(&link, now) {
            return Ok((open(&link.access_token)?, link.expires_at));
        }
        let relink = || {
            format!(
                "link it again at {} (or abode external-auth link {})",
                self.link_page(),
                provider.id
            )
        };
        let Some(sealed_refresh) = &link.refresh_token else {
            return Err(ControlError::Forbidden(format!(
                "the {} token expired and the provider gave no refresh token: {}",
                provider.id,
                relink()
            )));
        };
        let refresh_token = open(sealed_refresh)?;
        let (client, for_thread) = (self.client.clone(), provider.clone());
        let refreshed = tokio::task::spawn_blocking(move || {
            client
                .refresh(&for_thread, &refresh_token)
                .map(|tokens| (tokens, refresh_token))
        })
        .await
        .map_err(|error| ControlError::Internal(error.to_string()))?;
        let tokens = match refreshed {
            Ok((tokens, old_refresh)) => Tokens {
                // A provider that does not rotate keeps the old one good.
                refresh_token: tokens.refresh_token.or(Some(old_refresh)),
                ..tokens
            },
            Err(error @ oauth::OAuthError::Refused { .. }) => {
                return Err(ControlError::Forbidden(format!("{error}: {}", relink())))
            }
            Err(error) => return Err(ControlError::Internal(error.to_string())),
        };
        let renewed =
            self.sealed_link(cipher, user_id, &provider.id, &tokens, link.linked_at, now)?;
        if !self
            .store
            .refresh_external_auth_link(&renewed, link.refreshed_at)
            .await?
        {
            // Unlinked, linked again or refreshed elsewhere meanwhile: the
            // tokens this refresh got are nobody's; they are revoked.
            if let Some(problem) = self.revoke_link(provider.clone(), &renewed).await {
                tracing::warn!(provider = %provider.id, %problem, "a lost refresh's tokens were not revoked");
            }
            let current = self.link_of(user_id, provider).await.map_err(|_| {
                ControlError::Forbidden(format!(
                    "the {} account was unlinked meanwhile: {}",
                    provider.id,
                    relink()
                ))
            })?;
            if needs_refresh(&current, self.clock.now_ms()) {
                return Err(ControlError::Conflict(format!(
                    "the {} token was being refreshed elsewhere; try again",
                    provider.id
                )));
            }
            return Ok((open(&current.access_token)?, current.expires_at));
        }
        tracing::info!(provider = %provider.id, "external auth token refreshed");
        Ok((tokens.access_token, renewed.expires_at))
    }

    async fn link_of(
        &self,
        user_id: &str,
        provider: &Provider,
    ) -> Result<ExternalAuthLink, ControlError> {
        self.store
            .external_auth_links_of(user_id)
            .await?
            .into_iter()
            .find(|link| link.provider_id == provider.id)
            .ok_or_else(|| {
                ControlError::Forbidden(format!(
                    "the workspace's owner has not linked their {} account: link it at {} (or abode external-auth link {})",
                    provider.id,
                    self.link_page(),
                    provider.id
                ))
            })
    }

    /// Revokes and removes the links of suspended and deleted accounts. A
    /// link whose revocation failed stays (no token of a closed account is
    /// handed out) and is tried again at the next sweep.
    pub async fn sweep_closed_accounts(&self) -> Result<usize, ControlError> {
        let closed = self.store.external_auth_links_of_closed_accounts().await?;
        let mut swept = 0;
        for link in closed {
            let user = match self.store.user_by_id(&link.user_id).await {
                Ok(user) => user,
                Err(error) => {
                    tracing::warn!(%error, "a closed account's link was not swept");
                    continue;
                }
            };
            let problem = match self.provider(&link.provider_id) {
                Ok(provider) => self.revoke_link(provider.clone(), &link).await,
                Err(_) => None,
            };
            if let Some(problem) = problem {
                tracing::warn!(provider = %link.provider_id, user = %user.username, %problem,
                    "a closed account's tokens were not revoked; trying again at the next sweep");
                continue;
            }
            if self
                .store
                .delete_external_auth_link(&link.user_id, &link.provider_id)
                .await?
                .is_none()
            {
                continue;
            }
            swept += 1;
            let event = audit_event(
                None,
                None,
                "external_auth.unlink",
                "external_auth",
                &link.provider_id,
                "success",
                Some(format!("{}: account {}", user.username, user.status)),
            );
            self.audit.record(&event).await;
        }
        Ok(swept)
    }

    /// Revokes a removed link's tokens at the provider: what went wrong, if
    /// anything.
    async fn revoke_link(&self, provider: Provider, link: &ExternalAuthLink) -> Option<String> {
        let owner = Owner {
            user_id: &link.user_id,
            provider_id: &link.provider_id,
        };
        let cipher = match self.cipher() {
            Ok(cipher) => cipher,
            Err(error) => return Some(error.to_string()),
        };
        let tokens: Vec<String> = std::iter::once(&link.access_token)
            .chain(link.refresh_token.as_ref())
            .filter_map(|sealed| cipher.open(sealed, owner).ok())
            .collect();
        let client = self.client.clone();
        tokio::task::spawn_blocking(move || {
            tokens
                .iter()
                .map(|token| client.revoke(&provider, token))
                .find_map(Result::err)
        })
        .await
        .map_err(|error| error.to_string())
        .map_or_else(Some, |revoked| revoked.map(|error| error.to_string()))
    }

    fn sealed_link(
        &self,
        cipher: &TokenCipher,
        user_id: &str,
        provider_id: &str,
        tokens: &Tokens,
        linked_at: i64,
        now: i64,
    ) -> Result<ExternalAuthLink, ControlError> {
        let owner = Owner {
            user_id,
            provider_id,
        };
        let seal = |token: &str| {
            cipher
                .seal(token, owner)
                .map_err(|error| ControlError::Internal(error.to_string()))
        };
        Ok(ExternalAuthLink {
            user_id: user_id.to_string(),
            provider_id: provider_id.to_string(),
            access_token: seal(&tokens.access_token)?,
            refresh_token: tokens.refresh_token.as_deref().map(seal).transpose()?,
            expires_at: tokens.expires_in.map(|seconds| {
                now.saturating_add(i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX))
            }),
            key_id: cipher.key_id().to_string(),
            linked_at,
            refreshed_at: now,
        })
    }

    async fn record(
        &self,
        user: &abode_store::User,
        action: &str,
        provider: &str,
        outcome: &str,
        details: Option<String>,
    ) {
        let event = audit_event(
            Some(user),
            None,
            action,
            "external_auth",
            provider,
            outcome,
            details,
        );
        self.audit.record(&event).await;
    }
}

/// Removes and revokes the links of accounts that were suspended or
/// deleted: once at start (a server that stopped between a suspension and
/// its sweep), then each time this process revokes someone's access.
pub async fn closed_account_sweeper(
    external_auth: &ExternalAuth,
    mut revocations: watch::Receiver<u64>,
    mut shutdown: watch::Receiver<bool>,
) {
    if external_auth.config.providers.is_empty() {
        return;
    }
    loop {
        match external_auth.sweep_closed_accounts().await {
            Ok(0) => {}
            Ok(swept) => tracing::info!(swept, "external auth links of closed accounts revoked"),
            Err(error) => {
                tracing::warn!(%error, "external auth links of closed accounts not swept")
            }
        }
        // A revocation that failed (the provider unreachable) is tried
        // again at the next revocation here, and every 10 minutes.
        tokio::select! {
            changed = revocations.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(std::time::Duration::from_secs(600)) => {}
            _ = shutdown.wait_for(|stopping| *stopping) => return,
        }
    }
}

/// Re-encrypts every linked account's tokens under `new` (`abode server
/// rotate-external-auth-key`): each opens under `old` (or `new` already,
/// so that a second run is harmless), in one transaction, all or none.
/// Links under way are dropped (started again). Answers how many links.
pub async fn rotate_key(
    store: &Store,
    old: &TokenCipher,
    new: &TokenCipher,
) -> Result<u64, ControlError> {
    let reseal = |link: &ExternalAuthLink| -> Result<ExternalAuthLink, String> {
        let owner = Owner {
            user_id: &link.user_id,
            provider_id: &link.provider_id,
        };
        let reseal_one = |sealed: &str| -> Result<String, String> {
            let opened = if link.key_id == new.key_id() {
                new.open(sealed, owner)
            } else {
                old.open(sealed, owner)
            };
            let token = opened.map_err(|error| {
                format!("{} of user id {}: {error}", link.provider_id, link.user_id)
            })?;
            new.seal(&token, owner).map_err(|error| error.to_string())
        };
        Ok(ExternalAuthLink {
            access_token: reseal_one(&link.access_token)?,
            refresh_token: link.refresh_token.as_deref().map(reseal_one).transpose()?,
            key_id: new.key_id().to_string(),
            ..link.clone()
        })
    };
    let count = store
        .reseal_external_auth_links(&reseal)
        .await?
        .map_err(|refusal| {
            ControlError::BadRequest(format!(
                "nothing was re-encrypted: a token does not open under the old key: {refusal}"
            ))
        })?;
    let event = audit_event(
        None,
        None,
        "external_auth.rotate_key",
        "server",
        "external_auth",
        "success",
        Some(format!(
            "{count} link(s) re-encrypted from key {} to key {}",
            old.key_id(),
            new.key_id()
        )),
    );
    Audit::new(store.clone()).record(&event).await;
    Ok(count)
}
