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
//! It is a service of its own: it holds the store, the providers, the key
//! and the clock; nothing else reads or writes a token.

use std::sync::Arc;

use abode_external_auth::cipher::{Owner, TokenCipher};
use abode_external_auth::oauth::{self, Tokens};
use abode_external_auth::Provider;
use abode_store::{ExternalAuthLink, PendingExternalAuth, Store};

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

/// The accounts people link.
pub struct ExternalAuth {
    store: Store,
    config: ExternalAuthConfig,
    clock: Clock,
    access_url: String,
    audit: Audit,
    client: oauth::Client,
}

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
        }
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

    /// Starts `caller`'s link of provider `id`: the URL they open.
    pub async fn start_link(&self, caller: &Caller, id: &str) -> Result<String, ControlError> {
        let provider = self.provider(id)?;
        let cipher = self.cipher()?;
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
        Ok(oauth::authorize_url(provider, &self.redirect_uri(id), &state, &verifier).to_string())
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
        let owner = Owner {
            user_id: &caller.user.id,
            provider_id: id,
        };
        let cipher = self.cipher()?;
        let tokens: Vec<String> = std::iter::once(&link.access_token)
            .chain(link.refresh_token.as_ref())
            .filter_map(|sealed| cipher.open(sealed, owner).ok())
            .collect();
        let client = self.client.clone();
        let revoked = tokio::task::spawn_blocking(move || {
            tokens
                .iter()
                .map(|token| client.revoke(&provider, token))
                .find_map(Result::err)
        })
        .await
        .map_err(|error| ControlError::Internal(error.to_string()))?;
        let problem = revoked.map(|error| error.to_string());
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
