//! The OAuth 2.0 exchanges with a provider (RFC 6749, PKCE RFC 7636,
//! revocation RFC 7009, the device flow RFC 8628): the authorization URL a person opens, the code
//! traded for tokens, a refresh, a revocation. Blocking (ureq, Abode's one
//! TLS trust, no redirects followed, bounded in time and size): callers run
//! it off the async threads. No token or secret is ever in an error.

use std::io::Read;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use serde::Deserialize;
use url::Url;

use crate::Provider;

/// The longest one request to a provider may take.
const TIMEOUT: Duration = Duration::from_secs(15);
/// The largest answer read (a token answer is a few hundred bytes).
const MAX_BODY: u64 = 64 * 1024;

/// Why an exchange failed: one line, naming the provider and the step.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OAuthError {
    /// The provider refused (its `error` and `error_description`, or the
    /// status).
    #[error("{provider} refused the {step}: {reason}")]
    Refused {
        provider: String,
        step: &'static str,
        reason: String,
    },
    #[error("cannot reach {provider} for the {step}: {reason}")]
    Unreachable {
        provider: String,
        step: &'static str,
        reason: String,
    },
    #[error("the system's random source failed")]
    Random,
}

/// What a token endpoint answered.
#[derive(Clone, PartialEq, Eq)]
pub struct Tokens {
    pub access_token: String,
    pub refresh_token: Option<String>,
    /// Seconds from now, when the provider said.
    pub expires_in: Option<u64>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "(sensitive)"),
            )
            .field("expires_in", &self.expires_in)
            .finish_non_exhaustive()
    }
}

/// A device flow started (RFC 8628 §3.2): the person opens
/// `verification_uri` and types `user_code`; the server polls with
/// `device_code`.
#[derive(Clone, Deserialize)]
pub struct DeviceStart {
    pub device_code: String,
    pub user_code: String,
    pub verification_uri: String,
    /// The address with the code filled in, when the provider gives one.
    #[serde(default)]
    pub verification_uri_complete: Option<String>,
    /// Seconds the codes live.
    pub expires_in: u64,
    /// Seconds between two polls (5 when the provider does not say).
    #[serde(default = "default_interval")]
    pub interval: u64,
}

fn default_interval() -> u64 {
    5
}

impl std::fmt::Debug for DeviceStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceStart")
            .field("user_code", &self.user_code)
            .field("verification_uri", &self.verification_uri)
            .field("expires_in", &self.expires_in)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

/// One poll of a device flow (RFC 8628 §3.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DevicePoll {
    /// The person has not granted access yet: poll again.
    Pending,
    /// Poll again, 5 seconds more apart.
    SlowDown,
    Granted(Tokens),
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: Option<String>,
    refresh_token: Option<String>,
    expires_in: Option<u64>,
    error: Option<String>,
    error_description: Option<String>,
}

/// A random value of 32 bytes, base64url: a `state` or a PKCE verifier.
pub fn random_value() -> Result<String, OAuthError> {
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| OAuthError::Random)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// The PKCE `S256` challenge of `verifier`.
pub fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(ring::digest::digest(
        &ring::digest::SHA256,
        verifier.as_bytes(),
    ))
}

/// Where the person goes to grant access.
pub fn authorize_url(provider: &Provider, redirect_uri: &str, state: &str, verifier: &str) -> Url {
    let mut url = provider.auth_url.clone();
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &provider.client_id)
        .append_pair("redirect_uri", redirect_uri)
        .append_pair("state", state)
        .append_pair("code_challenge", &challenge(verifier))
        .append_pair("code_challenge_method", "S256");
    if !provider.scopes.is_empty() {
        url.query_pairs_mut()
            .append_pair("scope", &provider.scopes.join(" "));
    }
    url
}

/// The blocking client of the exchanges.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
}

impl Default for Client {
    fn default() -> Client {
        Client::new()
    }
}

impl Client {
    pub fn new() -> Client {
        Client {
            agent: ureq::AgentBuilder::new()
                .timeout(TIMEOUT)
                .redirects(0)
                .tls_config(abode_tls::client_config())
                .user_agent(concat!("abode/", env!("CARGO_PKG_VERSION")))
                .build(),
        }
    }

    /// Trades the authorization `code` for tokens.
    pub fn exchange_code(
        &self,
        provider: &Provider,
        redirect_uri: &str,
        code: &str,
        verifier: &str,
    ) -> Result<Tokens, OAuthError> {
        self.token_request(
            provider,
            "link",
            &[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", redirect_uri),
                ("code_verifier", verifier),
            ],
        )
    }

    /// New tokens for a refresh token.
    pub fn refresh(&self, provider: &Provider, refresh_token: &str) -> Result<Tokens, OAuthError> {
        self.token_request(
            provider,
            "refresh",
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh_token),
            ],
        )
    }

    /// Starts a device flow (the provider's `device_auth_url`).
    pub fn start_device(&self, provider: &Provider) -> Result<DeviceStart, OAuthError> {
        let step = "device authorization";
        let Some(url) = &provider.device_auth_url else {
            return Err(OAuthError::Refused {
                provider: provider.id.clone(),
                step,
                reason: "it has no device_auth_url".into(),
            });
        };
        let scope = provider.scopes.join(" ");
        let (status, body) = self.post(provider, step, url, &[("scope", scope.as_str())])?;
        match serde_json::from_slice::<DeviceStart>(&body) {
            Ok(start) if (200..300).contains(&status) => {
                // Where a person is sent comes from the network: only a
                // page as a configured URL could be (no `file:`, no
                // `javascript:`, nothing a browser opener takes as a flag).
                let pages = std::iter::once(&start.verification_uri)
                    .chain(start.verification_uri_complete.as_ref());
                for page in pages {
                    if !Url::parse(page).is_ok_and(|url| crate::url_allowed(&url)) {
                        return Err(OAuthError::Refused {
                            provider: provider.id.clone(),
                            step,
                            reason: "its verification page is not an https:// URL".into(),
                        });
                    }
                }
                Ok(start)
            }
            _ => Err(refused(provider, step, status, &body)),
        }
    }

    /// Asks whether the person granted the device flow `device_code`.
    pub fn poll_device(
        &self,
        provider: &Provider,
        device_code: &str,
    ) -> Result<DevicePoll, OAuthError> {
        let step = "device link";
        let (status, body) = self.post(
            provider,
            step,
            &provider.token_url,
            &[
                ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                ("device_code", device_code),
            ],
        )?;
        let pending: Option<TokenAnswer> = serde_json::from_slice(&body).ok();
        match pending.as_ref().and_then(|answer| answer.error.as_deref()) {
            Some("authorization_pending") => return Ok(DevicePoll::Pending),
            Some("slow_down") => return Ok(DevicePoll::SlowDown),
            _ => {}
        }
        tokens_of(provider, step, status, &body).map(DevicePoll::Granted)
    }

    /// Revokes `token` at the provider (RFC 7009); nothing to do for a
    /// provider without a revocation endpoint.
    pub fn revoke(&self, provider: &Provider, token: &str) -> Result<(), OAuthError> {
        let Some(url) = &provider.revoke_url else {
            return Ok(());
        };
        let answer = self.post(provider, "revocation", url, &[("token", token)])?;
        match answer {
            (status, _) if (200..300).contains(&status) => Ok(()),
            (status, body) => Err(refused(provider, "revocation", status, &body)),
        }
    }

    fn token_request(
        &self,
        provider: &Provider,
        step: &'static str,
        form: &[(&str, &str)],
    ) -> Result<Tokens, OAuthError> {
        let (status, body) = self.post(provider, step, &provider.token_url, form)?;
        tokens_of(provider, step, status, &body)
    }

    /// A form POST with the client's credentials in the body
    /// (`client_secret_post`, which GitHub, GitLab and Bitbucket take).
    fn post(
        &self,
        provider: &Provider,
        step: &'static str,
        url: &Url,
        form: &[(&str, &str)],
    ) -> Result<(u16, Vec<u8>), OAuthError> {
        let mut fields = form.to_vec();
        fields.push(("client_id", &provider.client_id));
        fields.push(("client_secret", &provider.client_secret));
        let result = self
            .agent
            .post(url.as_str())
            .set("accept", "application/json")
            .send_form(&fields);
        let response = match result {
            Ok(response) | Err(ureq::Error::Status(_, response)) => response,
            Err(ureq::Error::Transport(error)) => {
                return Err(OAuthError::Unreachable {
                    provider: provider.id.clone(),
                    step,
                    reason: error.kind().to_string(),
                })
            }
        };
        let status = response.status();
        let mut body = Vec::new();
        response
            .into_reader()
            .take(MAX_BODY)
            .read_to_end(&mut body)
            .map_err(|error| OAuthError::Unreachable {
                provider: provider.id.clone(),
                step,
                reason: error.kind().to_string(),
            })?;
        Ok((status, body))
    }
}

/// The tokens of a token endpoint's answer, or its refusal.
fn tokens_of(
    provider: &Provider,
    step: &'static str,
    status: u16,
    body: &[u8],
) -> Result<Tokens, OAuthError> {
    let answer: Option<TokenAnswer> = serde_json::from_slice(body).ok();
    match answer {
        Some(TokenAnswer {
            access_token: Some(access_token),
            refresh_token,
            expires_in,
            error: None,
            ..
        }) if (200..300).contains(&status) && !access_token.is_empty() => Ok(Tokens {
            access_token,
            refresh_token: refresh_token.filter(|token| !token.is_empty()),
            expires_in,
        }),
        _ => Err(refused(provider, step, status, body)),
    }
}

/// A refusal's one line: the provider's `error` (and description), else
/// its status. Never the body itself (it could hold a token).
fn refused(provider: &Provider, step: &'static str, status: u16, body: &[u8]) -> OAuthError {
    let answer: Option<TokenAnswer> = serde_json::from_slice(body).ok();
    let reason = match answer {
        Some(TokenAnswer {
            error: Some(error),
            error_description,
            ..
        }) => {
            let text = match error_description {
                Some(description) => format!("{error}: {description}"),
                None => error,
            };
            crate::one_line(&text).chars().take(300).collect()
        }
        _ => format!("status {status}"),
    };
    OAuthError::Refused {
        provider: provider.id.clone(),
        step,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_rfc_7636_s256() {
        // RFC 7636, appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let one = random_value().unwrap_or_default();
        assert_eq!(one.len(), 43);
        assert_ne!(one, random_value().unwrap_or_default());
    }
}
