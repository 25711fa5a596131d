//! The provider, over the network: its discovery document (fetched at the
//! first sign-in and kept; a failed fetch is tried again at the next), its
//! signing keys (fetched again when a token names a key they lack: a
//! provider rotates its keys and publishes the new one before signing with
//! it), the authorization request with PKCE, `state` and `nonce`, the code
//! exchange, the ID token's checks ([`crate::verify`]) and the userinfo
//! claims. Every request is blocking ureq ([`crate::http`]) run off the
//! async threads.

use std::sync::{Arc, RwLock};

use openidconnect::core::{
    CoreAuthenticationFlow, CoreClient, CoreJsonWebKeySet, CoreProviderMetadata,
};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointMaybeSet, EndpointNotSet,
    EndpointSet, IssuerUrl, Nonce, OAuth2TokenResponse, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, RequestTokenError, Scope, TokenResponse,
};
use serde_json::{Map, Value};

use crate::admit::{admit, Admitted, Refusal};
use crate::config::OidcConfig;
use crate::http::{origin_of, Http};
use crate::pending::{random_secret, PendingLogin, ReturnTo};
use crate::verify::{one_line, verify_id_token, Expected, TokenRefusal};

/// The client discovery makes: an authorization endpoint, maybe a token
/// and a userinfo endpoint.
type Client = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// The provider could not be used.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    #[error("cannot read the OpenID provider's discovery document at {issuer}: {reason}")]
    Discovery { issuer: String, reason: String },
    #[error("cannot read the OpenID provider's signing keys: {0}")]
    Keys(String),
    #[error("the OpenID provider's request could not be made: {0}")]
    Internal(String),
}

/// Why a callback did not sign anyone in; each is one line for the
/// refusal page and the audit log (no code, token or secret in any).
#[derive(Debug, Clone, thiserror::Error)]
pub enum SignInError {
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error("the identity provider did not sign you in: {0}")]
    ProviderSaid(String),
    #[error("this sign-in is unknown, already used or expired; start again")]
    UnknownState,
    #[error("the callback carries no code; start again")]
    NoCode,
    #[error("the identity provider refused to exchange the code: {0}")]
    Exchange(String),
    #[error("the identity provider's answer has no ID token (is the `openid` scope allowed for this client?)")]
    NoIdToken,
    #[error(transparent)]
    Token(#[from] TokenRefusal),
    #[error("the identity provider's userinfo could not be read: {0}")]
    Userinfo(String),
    /// The provider vouched for the person, the configuration refuses
    /// them; whom it named, so that their account's sessions can end.
    #[error("{refusal}")]
    Refused {
        refusal: Refusal,
        issuer: String,
        subject: String,
    },
}

impl SignInError {
    /// A short word for the audit log and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            SignInError::Provider(_) => "provider_unreachable",
            SignInError::ProviderSaid(_) => "provider_error",
            SignInError::UnknownState => "unknown_state",
            SignInError::NoCode => "no_code",
            SignInError::Exchange(_) => "code_exchange",
            SignInError::NoIdToken => "no_id_token",
            SignInError::Token(refusal) => refusal.reason(),
            SignInError::Userinfo(_) => "userinfo",
            SignInError::Refused { refusal, .. } => match refusal {
                Refusal::NotInAllowedGroups => "not_in_allowed_groups",
                Refusal::DomainNotAllowed(_) => "email_domain",
                Refusal::EmailNotVerified(_) => "email_not_verified",
                _ => "claims",
            },
        }
    }
}

/// What discovery found, kept for the server's life; the keys are
/// replaced when a token names one they lack.
struct Discovered {
    metadata: CoreProviderMetadata,
    keys: RwLock<CoreJsonWebKeySet>,
}

/// The configured provider.
pub struct Provider {
    config: Arc<OidcConfig>,
    http: Http,
    discovered: tokio::sync::Mutex<Option<Arc<Discovered>>>,
}

/// Where to send the browser, and what to keep until it comes back.
pub struct Authorization {
    /// The provider's authorization URL (it carries the state: not logged).
    pub url: String,
    pub state: String,
    pub login: PendingLogin,
}

impl Provider {
    pub fn new(config: OidcConfig) -> Provider {
        Provider {
            config: Arc::new(config),
            http: Http::new(),
            discovered: tokio::sync::Mutex::new(None),
        }
    }

    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    /// The discovery document and keys, fetched once (and again after a
    /// failure).
    async fn discovered(&self) -> Result<Arc<Discovered>, ProviderError> {
        let mut slot = self.discovered.lock().await;
        if let Some(found) = slot.as_ref() {
            return Ok(found.clone());
        }
        let http = self.http.clone();
        let issuer = self.config.issuer_url.clone();
        let metadata = tokio::task::spawn_blocking(move || {
            let url = IssuerUrl::new(issuer.clone()).map_err(|error| ProviderError::Discovery {
                issuer: issuer.clone(),
                reason: error.to_string(),
            })?;
            CoreProviderMetadata::discover(&url, &http).map_err(|error| ProviderError::Discovery {
                issuer: issuer.clone(),
                reason: one_line(&error_chain(&error)),
            })
        })
        .await
        .map_err(|error| ProviderError::Internal(error.to_string()))??;
        let keys = metadata.jwks().clone();
        let found = Arc::new(Discovered {
            metadata,
            keys: RwLock::new(keys),
        });
        *slot = Some(found.clone());
        Ok(found)
    }

    /// Reads the discovery document now (at start, so that a wrong issuer
    /// shows in the server's log before anyone signs in).
    pub async fn check(&self) -> Result<(), ProviderError> {
        self.discovered().await.map(|_| ())
    }

    fn client(&self, discovered: &Discovered) -> Result<Client, ProviderError> {
        let redirect = RedirectUrl::new(self.config.redirect_uri.clone())
            .map_err(|error| ProviderError::Internal(error.to_string()))?;
        Ok(CoreClient::from_provider_metadata(
            discovered.metadata.clone(),
            ClientId::new(self.config.client_id.clone()),
            Some(ClientSecret::new(self.config.client_secret().to_string())),
        )
        .set_redirect_uri(redirect))
    }

    /// A new sign-in: the provider's URL to send the browser to, with a
    /// fresh state, nonce and PKCE challenge, and what to keep.
    pub async fn begin(&self, return_to: ReturnTo) -> Result<Authorization, ProviderError> {
        let discovered = self.discovered().await?;
        let client = self.client(&discovered)?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let state = random_secret();
        let nonce = random_secret();
        let mut request = client.authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            {
                let state = state.clone();
                move || CsrfToken::new(state)
            },
            {
                let nonce = nonce.clone();
                move || Nonce::new(nonce)
            },
        );
        for scope in self.config.scopes.iter().filter(|scope| *scope != "openid") {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, _, _) = request.set_pkce_challenge(challenge).url();
        Ok(Authorization {
            url: url.to_string(),
            state,
            login: PendingLogin {
                nonce,
                pkce_verifier: verifier.secret().to_string(),
                return_to,
            },
        })
    }

    /// The end of a sign-in: the code exchanged (with the PKCE verifier),
    /// the ID token checked against the pending sign-in's nonce at `now`
    /// (seconds), userinfo's claims added, and the person admitted by the
    /// configuration.
    pub async fn finish(
        &self,
        login: &PendingLogin,
        code: &str,
        now: i64,
    ) -> Result<Admitted, SignInError> {
        let discovered = self.discovered().await?;
        let client = self.client(&discovered)?;
        let http = self.http.clone();
        let code = AuthorizationCode::new(code.to_string());
        let verifier = PkceCodeVerifier::new(login.pkce_verifier.clone());
        let response = tokio::task::spawn_blocking(move || {
            let request = client
                .exchange_code(code)
                .map_err(|error| SignInError::Exchange(one_line(&error.to_string())))?;
            request
                .set_pkce_verifier(verifier)
                .request(&http)
                .map_err(|error| match error {
                    RequestTokenError::ServerResponse(answer) => {
                        let mut line = answer.error().to_string();
                        if let Some(description) = answer.error_description() {
                            line.push_str(": ");
                            line.push_str(description);
                        }
                        SignInError::Exchange(one_line(&line))
                    }
                    other => SignInError::Exchange(one_line(&error_chain(&other))),
                })
        })
        .await
        .map_err(|error| ProviderError::Internal(error.to_string()))??;
        let raw = response
            .id_token()
            .map(ToString::to_string)
            .ok_or(SignInError::NoIdToken)?;
        let claims = self.verify(&discovered, &raw, &login.nonce, now).await?;
        let mut all = claims.all.clone();
        if let Some(endpoint) = discovered.metadata.userinfo_endpoint() {
            let extra = self
                .userinfo(endpoint.url().as_str(), response.access_token().secret())
                .await?;
            if extra
                .get("sub")
                .and_then(Value::as_str)
                .is_some_and(|sub| sub != claims.subject)
            {
                return Err(SignInError::Userinfo(
                    "it names another subject than the ID token".into(),
                ));
            }
            for (name, value) in extra {
                all.entry(name).or_insert(value);
            }
        }
        admit(&self.config, &claims.issuer, &claims.subject, &all).map_err(|refusal| {
            SignInError::Refused {
                refusal,
                issuer: claims.issuer.clone(),
                subject: claims.subject.clone(),
            }
        })
    }

    /// [`verify_id_token`] with the keys known, and once more with the
    /// keys fetched again when the token names a key they lack.
    async fn verify(
        &self,
        discovered: &Arc<Discovered>,
        raw: &str,
        nonce: &str,
        now: i64,
    ) -> Result<crate::verify::Claims, SignInError> {
        let issuer = discovered.metadata.issuer().to_string();
        let expected = Expected {
            issuer: &issuer,
            client_id: &self.config.client_id,
            nonce,
            now,
        };
        let keys = discovered
            .keys
            .read()
            .map_err(|_| ProviderError::Internal("the key set's lock is poisoned".into()))?
            .clone();
        match verify_id_token(raw, &keys, &expected) {
            Err(TokenRefusal::UnknownKey) => {}
            other => return Ok(other?),
        }
        let http = self.http.clone();
        let url = discovered.metadata.jwks_uri().clone();
        let fresh = tokio::task::spawn_blocking(move || CoreJsonWebKeySet::fetch(&url, &http))
            .await
            .map_err(|error| ProviderError::Internal(error.to_string()))?
            .map_err(|error| ProviderError::Keys(one_line(&error_chain(&error))))?;
        tracing::info!(
            "the OpenID provider's signing keys were fetched again (a token named a new key)"
        );
        if let Ok(mut keys) = discovered.keys.write() {
            *keys = fresh.clone();
        }
        Ok(verify_id_token(raw, &fresh, &expected)?)
    }

    /// The userinfo endpoint's claims (a JSON answer; a signed one is not
    /// read and adds nothing).
    async fn userinfo(
        &self,
        endpoint: &str,
        access_token: &str,
    ) -> Result<Map<String, Value>, SignInError> {
        let http = self.http.clone();
        let request = openidconnect::http::Request::builder()
            .method("GET")
            .uri(endpoint)
            .header("authorization", format!("Bearer {access_token}"))
            .header("accept", "application/json")
            .body(Vec::new())
            .map_err(|error| SignInError::Userinfo(one_line(&error.to_string())))?;
        let origin = origin_of(endpoint);
        let response = tokio::task::spawn_blocking(move || http.call(request))
            .await
            .map_err(|error| ProviderError::Internal(error.to_string()))?
            .map_err(|error| SignInError::Userinfo(one_line(&error.to_string())))?;
        if !response.status().is_success() {
            return Err(SignInError::Userinfo(format!(
                "{origin} answered HTTP {}",
                response.status().as_u16()
            )));
        }
        let json = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        if !json {
            return Ok(Map::new());
        }
        match serde_json::from_slice(response.body()) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Err(SignInError::Userinfo(format!(
                "{origin} answered something other than a JSON object"
            ))),
        }
    }
}

/// An error and its sources, in one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(current) = source {
        let text = current.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = current.source();
    }
    line
}
