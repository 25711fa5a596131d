//! Passwords and tokens: how they are made, hashed and checked.
//!
//! Passwords are hashed with argon2 (slow and memory-hard on purpose, so it
//! runs on the bounded hashing pool, `hashing.rs`, never on the async threads).
//! Tokens are long random strings, so a fast SHA-256 is enough to store them:
//! the server keeps only the hash and can never show a token again.

use argon2::password_hash::{
    rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString,
};
use argon2::Argon2;
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::ControlError;

/// Prefix of session tokens, so that a leaked one is recognisable in a scan.
const SESSION_TOKEN_PREFIX: &str = "abode_";

/// Prefix of API tokens: tells them from sessions at a glance (and in a scan).
const API_TOKEN_PREFIX: &str = "abode_api_";

/// An argon2id hash with the default parameters (those every stored password
/// is hashed with) of no password anyone knows. A login for an unknown user
/// checks the password against it, so that it costs what a real check costs
/// and timing does not tell which usernames exist.
pub(crate) const DUMMY_PASSWORD_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$YWJvZGVkdW1teXNhbHQwMQ$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

/// Hashes a password (blocking: call it on the hashing pool).
pub(crate) fn hash_password(password: &str) -> Result<String, ControlError> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|error| ControlError::Internal(format!("cannot hash a password: {error}")))
}

/// Checks a password against a stored hash (blocking: call it on the hashing
/// pool). An unreadable stored hash never matches.
pub(crate) fn verify_password(password: &str, stored_hash: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(stored_hash) else {
        return false;
    };
    Argon2::default()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok()
}

/// A new API token: like a session token, with its own prefix.
pub fn new_api_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("{API_TOKEN_PREFIX}{}", hex(&bytes))
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

    #[test]
    fn password_round_trip() {
        let hash = hash_password("correct horse").unwrap();
        assert!(!hash.contains("correct horse"));
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("wrong", &hash));
        assert!(!verify_password("x", "not a hash"));
    }

    /// The dummy costs what a real check costs: same algorithm, version and
    /// parameters as a fresh hash; and nothing matches it.
    #[test]
    fn the_dummy_hash_has_the_parameters_of_real_ones() {
        let real = hash_password("correct horse").unwrap();
        let real = PasswordHash::new(&real).unwrap();
        let dummy = PasswordHash::new(DUMMY_PASSWORD_HASH).unwrap();
        assert_eq!(dummy.algorithm, real.algorithm);
        assert_eq!(dummy.version, real.version);
        assert_eq!(
            argon2::Params::try_from(&dummy).unwrap(),
            argon2::Params::try_from(&real).unwrap()
        );
        assert_eq!(dummy.hash.map(|h| h.len()), real.hash.map(|h| h.len()));
        assert!(!verify_password("", DUMMY_PASSWORD_HASH));
        assert!(!verify_password("correct horse", DUMMY_PASSWORD_HASH));
    }

    #[test]
    fn tokens_are_unique_and_hashed_stably() {
        let a = new_session_token();
        assert_ne!(a, new_session_token());
        assert!(a.starts_with("abode_") && a.len() == 6 + 64);
        assert_eq!(token_hash(&a), token_hash(&a));
        let api = new_api_token();
        assert!(api.starts_with("abode_api_") && api.len() == 10 + 64);
        assert_eq!(
            token_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
