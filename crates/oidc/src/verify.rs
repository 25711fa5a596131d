//! The checks of an ID token, apart from any network: its signature by one
//! of the provider's keys with an asymmetric algorithm (`alg: none` and the
//! HMAC algorithms, whose key would be the client secret, are refused), its
//! issuer, its audience (this client), its expiry and the nonce of the
//! sign-in that asked for it. `openidconnect` does the work; this module
//! chooses the rules and names each refusal, so that the provider module
//! can tell an unknown key (fetch the keys again) from everything else.

use openidconnect::core::{
    CoreGenderClaim, CoreJsonWebKey, CoreJsonWebKeySet, CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
};
use openidconnect::{
    ClaimsVerificationError, ClientId, IdTokenVerifier, IssuerUrl, Nonce,
    SignatureVerificationError,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Every claim of a token beyond the standard ones the library reads, kept
/// as JSON: the username and group claims are whatever the flags name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExtraClaims {
    #[serde(flatten)]
    pub claims: Map<String, Value>,
}

impl openidconnect::AdditionalClaims for ExtraClaims {}

/// An ID token whose other claims are kept.
pub type IdToken = openidconnect::IdToken<
    ExtraClaims,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;

/// The signature algorithms accepted: asymmetric only.
pub const ALLOWED_ALGS: &[CoreJwsSigningAlgorithm] = &[
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha384,
    CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha512,
    CoreJwsSigningAlgorithm::RsaSsaPssSha256,
    CoreJwsSigningAlgorithm::RsaSsaPssSha384,
    CoreJwsSigningAlgorithm::RsaSsaPssSha512,
    CoreJwsSigningAlgorithm::EcdsaP256Sha256,
    CoreJwsSigningAlgorithm::EcdsaP384Sha384,
    CoreJwsSigningAlgorithm::EdDsa,
];

/// What a token is checked against.
#[derive(Debug, Clone)]
pub struct Expected<'a> {
    /// The provider's issuer, as its discovery document says it.
    pub issuer: &'a str,
    pub client_id: &'a str,
    /// The nonce of the pending sign-in this token answers.
    pub nonce: &'a str,
    /// Now, in seconds since the epoch (the server's clock).
    pub now: i64,
}

/// What a checked ID token says.
#[derive(Debug, Clone, PartialEq)]
pub struct Claims {
    pub issuer: String,
    pub subject: String,
    /// Every claim of the token, standard ones included, as JSON.
    pub all: Map<String, Value>,
}

/// Why an ID token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    #[error("the ID token is not a signed JWT: {0}")]
    Malformed(String),
    #[error("the ID token is signed by a key the provider does not publish")]
    UnknownKey,
    #[error("the ID token's signature does not verify")]
    BadSignature,
    #[error("the ID token's signature algorithm `{0}` is refused (asymmetric signatures only)")]
    AlgorithmRefused(String),
    #[error("the ID token has expired")]
    Expired,
    #[error("the ID token is for another client (audience)")]
    WrongAudience,
    #[error("the ID token comes from another issuer")]
    WrongIssuer,
    #[error("the ID token answers another sign-in (nonce)")]
    WrongNonce,
    #[error("the ID token was refused: {0}")]
    Invalid(String),
}

impl TokenRefusal {
    /// The check that failed, as the audit log's `reason=` says it: a
    /// forgery (its algorithm, signature, audience, issuer or nonce) is
    /// told from a clock that drifted (expiry) without the server's log.
    pub fn reason(&self) -> &'static str {
        match self {
            TokenRefusal::Malformed(_) => "id_token_malformed",
            TokenRefusal::UnknownKey => "id_token_unknown_key",
            TokenRefusal::BadSignature => "id_token_signature",
            TokenRefusal::AlgorithmRefused(_) => "id_token_algorithm",
            TokenRefusal::Expired => "id_token_expired",
            TokenRefusal::WrongAudience => "id_token_audience",
            TokenRefusal::WrongIssuer => "id_token_issuer",
            TokenRefusal::WrongNonce => "id_token_nonce",
            TokenRefusal::Invalid(_) => "id_token_invalid",
        }
    }
}

/// Checks `raw` against `keys` and `expected`; the claims when it holds.
pub fn verify_id_token(
    raw: &str,
    keys: &CoreJsonWebKeySet,
    expected: &Expected<'_>,
) -> Result<Claims, TokenRefusal> {
    let token: IdToken = raw.trim().parse().map_err(|error: serde_json::Error| {
        TokenRefusal::Malformed(one_line(&error.to_string()))
    })?;
    let issuer = IssuerUrl::new(expected.issuer.to_string())
        .map_err(|error| TokenRefusal::Invalid(one_line(&error.to_string())))?;
    let now = chrono::DateTime::<chrono::Utc>::from_timestamp(expected.now, 0)
        .ok_or_else(|| TokenRefusal::Invalid("the server's clock is out of range".into()))?;
    let verifier = IdTokenVerifier::<CoreJsonWebKey>::new_public_client(
        ClientId::new(expected.client_id.to_string()),
        issuer,
        keys.clone(),
    )
    .set_allowed_algs(ALLOWED_ALGS.iter().cloned())
    .set_time_fn(move || now);
    let nonce = Nonce::new(expected.nonce.to_string());
    // The header's algorithm, to name it in a refusal: the library's own
    // sentence lists the allowed ones in no fixed order.
    let alg = token
        .signing_alg()
        .ok()
        .and_then(|alg| serde_json::to_value(alg).ok())
        .and_then(|alg| alg.as_str().map(one_line));
    let claims = token
        .claims(&verifier, &nonce)
        .map_err(|error| refusal(error, alg.as_deref()))?;
    let mut all = match serde_json::to_value(claims) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    // The extra claims were flattened into the same object; what the
    // library read is there too, under the standard names.
    for (name, value) in &claims.additional_claims().claims {
        all.entry(name.clone()).or_insert_with(|| value.clone());
    }
    Ok(Claims {
        issuer: claims.issuer().to_string(),
        subject: claims.subject().to_string(),
        all,
    })
}

/// The refusal of `error`; `alg` is the token's header's algorithm.
fn refusal(error: ClaimsVerificationError, alg: Option<&str>) -> TokenRefusal {
    match error {
        ClaimsVerificationError::Expired(_) => TokenRefusal::Expired,
        ClaimsVerificationError::InvalidAudience(_) => TokenRefusal::WrongAudience,
        ClaimsVerificationError::InvalidIssuer(_) => TokenRefusal::WrongIssuer,
        ClaimsVerificationError::InvalidNonce(_) => TokenRefusal::WrongNonce,
        ClaimsVerificationError::SignatureVerification(signature) => match signature {
            SignatureVerificationError::NoMatchingKey => TokenRefusal::UnknownKey,
            SignatureVerificationError::CryptoError(_) => TokenRefusal::BadSignature,
            SignatureVerificationError::NoSignature => {
                TokenRefusal::AlgorithmRefused("none".into())
            }
            SignatureVerificationError::DisallowedAlg(said)
            | SignatureVerificationError::UnsupportedAlg(said) => {
                TokenRefusal::AlgorithmRefused(alg.map_or_else(|| one_line(&said), str::to_string))
            }
            other => TokenRefusal::Invalid(one_line(&other.to_string())),
        },
        other => TokenRefusal::Invalid(one_line(&other.to_string())),
    }
}

/// At most 200 characters, no line breaks: refusals end up in pages and logs.
pub(crate) fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SignInError;

    /// Each failed check has an audit reason of its own, and a sign-in
    /// refused for its ID token is audited with it.
    #[test]
    fn each_refusal_has_its_own_audit_reason() {
        let refusals = [
            TokenRefusal::Malformed("x".into()),
            TokenRefusal::UnknownKey,
            TokenRefusal::BadSignature,
            TokenRefusal::AlgorithmRefused("none".into()),
            TokenRefusal::Expired,
            TokenRefusal::WrongAudience,
            TokenRefusal::WrongIssuer,
            TokenRefusal::WrongNonce,
            TokenRefusal::Invalid("x".into()),
        ];
        let mut reasons: Vec<&str> = refusals.iter().map(TokenRefusal::reason).collect();
        for (refusal, reason) in refusals.iter().zip(&reasons) {
            assert!(reason.starts_with("id_token_"), "{refusal}: {reason}");
            assert_eq!(SignInError::Token(refusal.clone()).reason(), *reason);
        }
        reasons.sort_unstable();
        reasons.dedup();
        assert_eq!(reasons.len(), refusals.len(), "{reasons:?}");
    }
}
