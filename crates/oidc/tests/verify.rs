//! The ID token's checks as a table: a token's header, claims and signing
//! key, and the refusal expected (or none). Tokens are made here, signed
//! with test keys (Ed25519, fixed below) and checked against a local key set.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use openidconnect::core::{CoreEdDsaPrivateSigningKey, CoreJsonWebKeySet, CoreJwsSigningAlgorithm};
use openidconnect::{JsonWebKeyId, PrivateSigningKey};
use serde_json::{json, Value};

use abode_oidc::verify::{verify_id_token, Expected};
use abode_oidc::TokenRefusal;

/// Test keys only, never used anywhere else.
const KEY_A: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIG+MNDTqwAUqd48mehiF7Q3QcWvgUc1tyVNFHHTf1is5
-----END PRIVATE KEY-----";
const KEY_B: &str = "-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIK/U0HMgp7NJ6620VEArrcduxMEQOtEfM8G29lPpYzlw
-----END PRIVATE KEY-----";

const ISSUER: &str = "https://id.example.com";
const CLIENT: &str = "abode";
const NONCE: &str = "nonce-1";
const NOW: i64 = 1_800_000_000;

fn key(pem: &str, kid: &str) -> CoreEdDsaPrivateSigningKey {
    CoreEdDsaPrivateSigningKey::from_ed25519_pem(pem, Some(JsonWebKeyId::new(kid.into()))).unwrap()
}

/// A compact JWS of `header` and `claims`, signed by `signer` (none: an
/// empty signature).
fn token(header: &Value, claims: &Value, signer: Option<&CoreEdDsaPrivateSigningKey>) -> String {
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = signer
        .map(|key| {
            key.sign(&CoreJwsSigningAlgorithm::EdDsa, input.as_bytes())
                .unwrap()
        })
        .unwrap_or_default();
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

fn good_claims() -> Value {
    json!({
        "iss": ISSUER,
        "sub": "user-1",
        "aud": CLIENT,
        "exp": NOW + 300,
        "iat": NOW - 10,
        "nonce": NONCE,
        "email": "ann@example.com",
        "email_verified": true,
        "groups": ["dev"],
    })
}

fn with(change: &[(&str, Value)]) -> Value {
    let mut claims = good_claims();
    for (name, value) in change {
        if value.is_null() {
            claims.as_object_mut().unwrap().remove(*name);
        } else {
            claims[*name] = value.clone();
        }
    }
    claims
}

#[test]
fn id_tokens_are_refused_for_each_reason() {
    let a = key(KEY_A, "a");
    let b = key(KEY_B, "b");
    // A key "b2" with key A's kid: a token signed by B under A's name.
    let b_as_a = key(KEY_B, "a");
    let keys = CoreJsonWebKeySet::new(vec![a.as_verification_key()]);
    let eddsa = json!({"alg": "EdDSA", "kid": "a", "typ": "JWT"});
    let cases: Vec<(&str, String, Option<TokenRefusal>)> = vec![
        ("good", token(&eddsa, &good_claims(), Some(&a)), None),
        (
            "audience is another client",
            token(&eddsa, &with(&[("aud", json!("other"))]), Some(&a)),
            Some(TokenRefusal::WrongAudience),
        ),
        (
            "audience list without us",
            token(&eddsa, &with(&[("aud", json!(["x", "y"]))]), Some(&a)),
            Some(TokenRefusal::WrongAudience),
        ),
        (
            "expired",
            token(&eddsa, &with(&[("exp", json!(NOW - 1))]), Some(&a)),
            Some(TokenRefusal::Expired),
        ),
        (
            "another issuer",
            token(
                &eddsa,
                &with(&[("iss", json!("https://evil.example.com"))]),
                Some(&a),
            ),
            Some(TokenRefusal::WrongIssuer),
        ),
        (
            "another sign-in's nonce",
            token(&eddsa, &with(&[("nonce", json!("nonce-2"))]), Some(&a)),
            Some(TokenRefusal::WrongNonce),
        ),
        (
            "no nonce",
            token(&eddsa, &with(&[("nonce", Value::Null)]), Some(&a)),
            Some(TokenRefusal::WrongNonce),
        ),
        (
            "signed by another key under a known kid",
            token(&eddsa, &good_claims(), Some(&b_as_a)),
            Some(TokenRefusal::BadSignature),
        ),
        (
            "signed by a key the provider does not publish",
            token(
                &json!({"alg": "EdDSA", "kid": "b"}),
                &good_claims(),
                Some(&b),
            ),
            Some(TokenRefusal::UnknownKey),
        ),
        (
            "alg none",
            token(&json!({"alg": "none", "typ": "JWT"}), &good_claims(), None),
            Some(TokenRefusal::AlgorithmRefused("none".into())),
        ),
        (
            "alg none with a kid",
            token(&json!({"alg": "none", "kid": "a"}), &good_claims(), None),
            Some(TokenRefusal::AlgorithmRefused("none".into())),
        ),
        (
            "HMAC keyed by anything",
            token(
                &json!({"alg": "HS256", "kid": "a"}),
                &good_claims(),
                Some(&a),
            ),
            Some(TokenRefusal::AlgorithmRefused("HS256".into())),
        ),
        (
            "claims changed after signing",
            {
                let signed = token(&eddsa, &good_claims(), Some(&a));
                let parts: Vec<&str> = signed.split('.').collect();
                let forged = URL_SAFE_NO_PAD.encode(with(&[("sub", json!("admin"))]).to_string());
                format!("{}.{forged}.{}", parts[0], parts[2])
            },
            Some(TokenRefusal::BadSignature),
        ),
        (
            "not a JWT",
            "not-a-token".to_string(),
            Some(TokenRefusal::Malformed(String::new())),
        ),
    ];
    let expected_for = Expected {
        issuer: ISSUER,
        client_id: CLIENT,
        nonce: NONCE,
        now: NOW,
    };
    for (name, raw, expected) in cases {
        let got = verify_id_token(&raw, &keys, &expected_for);
        match (got, expected) {
            (Ok(claims), None) => {
                assert_eq!(claims.subject, "user-1", "{name}");
                assert_eq!(claims.issuer, ISSUER, "{name}");
                assert_eq!(claims.all["groups"], json!(["dev"]), "{name}");
                assert_eq!(claims.all["email"], json!("ann@example.com"), "{name}");
            }
            // A refused algorithm is named as the header names it (the
            // refusal page shows it); other variants with a text compare by
            // kind: the library's words are its own.
            (Err(refusal @ TokenRefusal::AlgorithmRefused(_)), Some(expected)) => {
                assert_eq!(refusal, expected, "{name}: {refusal}")
            }
            (Err(refusal), Some(expected)) => assert_eq!(
                std::mem::discriminant(&refusal),
                std::mem::discriminant(&expected),
                "{name}: {refusal}"
            ),
            (got, expected) => panic!("{name}: got {got:?}, expected {expected:?}"),
        }
    }
}

#[test]
fn a_rotated_key_verifies_once_the_new_set_is_known() {
    let b = key(KEY_B, "b");
    let raw = token(
        &json!({"alg": "EdDSA", "kid": "b"}),
        &good_claims(),
        Some(&b),
    );
    let expected = Expected {
        issuer: ISSUER,
        client_id: CLIENT,
        nonce: NONCE,
        now: NOW,
    };
    let old = CoreJsonWebKeySet::new(vec![key(KEY_A, "a").as_verification_key()]);
    assert_eq!(
        verify_id_token(&raw, &old, &expected),
        Err(TokenRefusal::UnknownKey)
    );
    let new = CoreJsonWebKeySet::new(vec![
        key(KEY_A, "a").as_verification_key(),
        b.as_verification_key(),
    ]);
    assert!(verify_id_token(&raw, &new, &expected).is_ok());
}

/// The refusal of an algorithm names it once, in words that do not change
/// from one refusal to the next (the library's own sentence lists the
/// allowed algorithms in no fixed order).
#[test]
fn a_refused_algorithm_is_named_once() {
    let a = key(KEY_A, "a");
    let keys = CoreJsonWebKeySet::new(vec![a.as_verification_key()]);
    let raw = token(
        &json!({"alg": "HS256", "typ": "JWT"}),
        &good_claims(),
        Some(&a),
    );
    let expected = Expected {
        issuer: ISSUER,
        client_id: CLIENT,
        nonce: NONCE,
        now: NOW,
    };
    let refusal = verify_id_token(&raw, &keys, &expected).unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "the ID token's signature algorithm `HS256` is refused (asymmetric signatures only)"
    );
}
