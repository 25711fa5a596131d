//! Passwords and tokens: how they are made, hashed and checked.
//!
//! Passwords are hashed with argon2 (slow on purpose, so it runs off the async
//! threads). Tokens are long random strings, so a fast SHA-256 is enough to
//! store them: the server keeps only the hash and can never show a token again.

use argon2::password_hash::{
    rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString,
};
use argon2::Argon2;
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::ControlError;

/// Prefix of session tokens, so that a leaked one is recognisable in a scan.
const SESSION_TOKEN_PREFIX: &str = "abode_";

pub async fn hash_password(password: String) -> Result<String, ControlError> {
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut OsRng);
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|hash| hash.to_string())
            .map_err(|error| ControlError::Internal(format!("cannot hash a password: {error}")))
    })
    .await
    .map_err(|error| ControlError::Internal(format!("password hashing task failed: {error}")))?
}

pub async fn verify_password(password: String, stored_hash: String) -> Result<bool, ControlError> {
    tokio::task::spawn_blocking(move || {
        let Ok(parsed) = PasswordHash::new(&stored_hash) else {
            return false;
        };
        Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
    .await
    .map_err(|error| ControlError::Internal(format!("password check task failed: {error}")))
}

/// A new session token: 32 random bytes, hex, with a recognisable prefix.
pub fn new_session_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("{SESSION_TOKEN_PREFIX}{}", hex(&bytes))
}

/// SHA-256 of a token, hex: what the database keeps.
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, byte| {
            let _ = write!(out, "{byte:02x}");
            out
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[tokio::test]
    async fn password_round_trip() {
        let hash = hash_password("correct horse".into()).await.unwrap();
        assert!(!hash.contains("correct horse"));
        assert!(verify_password("correct horse".into(), hash.clone())
            .await
            .unwrap());
        assert!(!verify_password("wrong".into(), hash).await.unwrap());
        assert!(!verify_password("x".into(), "not a hash".into())
            .await
            .unwrap());
    }

    #[test]
    fn tokens_are_unique_and_hashed_stably() {
        let a = new_session_token();
        assert_ne!(a, new_session_token());
        assert!(a.starts_with("abode_") && a.len() == 6 + 64);
        assert_eq!(token_hash(&a), token_hash(&a));
        assert_eq!(
            token_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
