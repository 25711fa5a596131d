//! Passwords and tokens: how they are made, hashed and checked.
//!
//! Passwords are hashed with argon2 (slow and memory-hard on purpose, so it
//! runs on the bounded hashing pool, `hashing.rs`, never on the async threads).
//! Tokens are long random strings, so a fast SHA-256 is enough to store them:
//! the server keeps only the hash and can never show a token again.

use argon2::password_hash::{rand_core::OsRng, Output, PasswordHash, SaltString};
use argon2::Argon2;
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::CredentialError;

/// Prefix of session tokens, so that a leaked one is recognisable in a scan.
const SESSION_TOKEN_PREFIX: &str = "abode_";

/// Prefix of API tokens: tells them from sessions at a glance (and in a scan).
const API_TOKEN_PREFIX: &str = "abode_api_";

/// Prefix of provisioner keys (`abode provisioner keys create`).
const PROVISIONER_KEY_PREFIX: &str = "abode_pk_";

/// An argon2id hash with the default parameters (those every stored password
/// is hashed with) of no password anyone knows. A login for an unknown user
/// checks the password against it, so that it costs what a real check costs
/// and timing does not tell which usernames exist.
pub const DUMMY_PASSWORD_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$YWJvZGVkdW1teXNhbHQwMQ$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

/// Argon2's working memory (~19 MiB with the default parameters). Each
/// hashing thread keeps one and reuses it for every hash: allocating it per
/// hash let glibc's arenas fragment and grow by a multiple of it under load.
pub type Memory = Vec<argon2::Block>;

/// `memory` sized for `argon2`'s parameters (grown once, then reused).
fn blocks<'m>(argon2: &Argon2<'_>, memory: &'m mut Memory) -> &'m mut [argon2::Block] {
    let count = argon2.params().block_count();
    if memory.len() < count {
        memory.resize(count, argon2::Block::default());
    }
    &mut memory[..count]
}

/// Hashes a password with the default parameters into a PHC string
/// (blocking: call it on the hashing pool, with that thread's memory).
pub fn hash_password(password: &str, memory: &mut Memory) -> Result<String, CredentialError> {
    let failed = |error: &dyn std::fmt::Display| {
        CredentialError::Internal(format!("cannot hash a password: {error}"))
    };
    let argon2 = Argon2::default();
    let salt = SaltString::generate(&mut OsRng);
    let mut salt_bytes = [0u8; 64];
    let salt_bytes = salt
        .decode_b64(&mut salt_bytes)
        .map_err(|error| failed(&error))?;
    let mut output = [0u8; argon2::Params::DEFAULT_OUTPUT_LEN];
    argon2
        .hash_password_into_with_memory(
            password.as_bytes(),
            salt_bytes,
            &mut output,
            blocks(&argon2, memory),
        )
        .map_err(|error| failed(&error))?;
    let hash = PasswordHash {
        algorithm: argon2::Algorithm::default().ident(),
        version: Some(argon2::Version::default().into()),
        params: argon2::password_hash::ParamsString::try_from(argon2.params())
            .map_err(|error| failed(&error))?,
        salt: Some(salt.as_salt()),
        hash: Some(Output::new(&output).map_err(|error| failed(&error))?),
    };
    Ok(hash.to_string())
}

/// Checks a password against a stored PHC hash (blocking: call it on the
/// hashing pool, with that thread's memory). An unreadable stored hash never
/// matches.
pub fn verify_password(password: &str, stored_hash: &str, memory: &mut Memory) -> bool {
    let Ok(parsed) = PasswordHash::new(stored_hash) else {
        return false;
    };
    let (Some(salt), Some(expected)) = (parsed.salt, parsed.hash) else {
        return false;
    };
    let Ok(algorithm) = argon2::Algorithm::try_from(parsed.algorithm) else {
        return false;
    };
    let version = match parsed.version.map(argon2::Version::try_from).transpose() {
        Ok(version) => version.unwrap_or_default(),
        Err(_) => return false,
    };
    let Ok(params) = argon2::Params::try_from(&parsed) else {
        return false;
    };
    let mut salt_bytes = [0u8; 64];
    let Ok(salt_bytes) = salt.decode_b64(&mut salt_bytes) else {
        return false;
    };
    let argon2 = Argon2::new(algorithm, version, params);
    let mut output = [0u8; Output::MAX_LENGTH];
    let output = &mut output[..expected.len()];
    if argon2
        .hash_password_into_with_memory(
            password.as_bytes(),
            salt_bytes,
            output,
            blocks(&argon2, memory),
        )
        .is_err()
    {
        return false;
    }
    // `Output`'s equality is constant-time.
    Output::new(output).is_ok_and(|computed| computed == expected)
}

/// A new API token: like a session token, with its own prefix.
pub fn new_api_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("{API_TOKEN_PREFIX}{}", hex(&bytes))
}

/// A new provisioner key: like an API token, with its own prefix.
pub fn new_provisioner_key() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("{PROVISIONER_KEY_PREFIX}{}", hex(&bytes))
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
    fn password_round_trip_with_reused_memory() {
        let mut memory = Memory::new();
        let hash = hash_password("correct horse", &mut memory).unwrap();
        assert!(!hash.contains("correct horse"));
        // The same memory serves every hash, dirty from the last one.
        for _ in 0..2 {
            assert!(verify_password("correct horse", &hash, &mut memory));
            assert!(!verify_password("wrong", &hash, &mut memory));
        }
        assert!(!verify_password("x", "not a hash", &mut memory));
        assert_eq!(memory.len(), argon2::Params::default().block_count());
    }

    /// Hashes made the usual way (argon2's own PasswordHasher, as stored by
    /// earlier servers) verify here, and ours verify there.
    #[test]
    fn hashes_are_interchangeable_with_the_argon2_crates_own() {
        use argon2::password_hash::{PasswordHasher, PasswordVerifier};
        let mut memory = Memory::new();
        let salt = SaltString::generate(&mut OsRng);
        let theirs = Argon2::default()
            .hash_password(b"correct horse", &salt)
            .unwrap()
            .to_string();
        assert!(verify_password("correct horse", &theirs, &mut memory));
        assert!(!verify_password("correct horsE", &theirs, &mut memory));
        let ours = hash_password("correct horse", &mut memory).unwrap();
        let ours = PasswordHash::new(&ours).unwrap();
        assert!(Argon2::default()
            .verify_password(b"correct horse", &ours)
            .is_ok());
    }

    /// The dummy costs what a real check costs: same algorithm, version and
    /// parameters as a fresh hash; and nothing matches it.
    #[test]
    fn the_dummy_hash_has_the_parameters_of_real_ones() {
        let mut memory = Memory::new();
        let real = hash_password("correct horse", &mut memory).unwrap();
        let real = PasswordHash::new(&real).unwrap();
        let dummy = PasswordHash::new(DUMMY_PASSWORD_HASH).unwrap();
        assert_eq!(dummy.algorithm, real.algorithm);
        assert_eq!(dummy.version, real.version);
        assert_eq!(
            argon2::Params::try_from(&dummy).unwrap(),
            argon2::Params::try_from(&real).unwrap()
        );
        assert_eq!(dummy.hash.map(|h| h.len()), real.hash.map(|h| h.len()));
        assert!(!verify_password("", DUMMY_PASSWORD_HASH, &mut memory));
        assert!(!verify_password(
            "correct horse",
            DUMMY_PASSWORD_HASH,
            &mut memory
        ));
    }

    #[test]
    fn tokens_are_unique_and_hashed_stably() {
        let a = new_session_token();
        assert_ne!(a, new_session_token());
        assert!(a.starts_with("abode_") && a.len() == 6 + 64);
        assert_eq!(token_hash(&a), token_hash(&a));
        let api = new_api_token();
        assert!(api.starts_with("abode_api_") && api.len() == 10 + 64);
        let key = new_provisioner_key();
        assert!(key.starts_with("abode_pk_") && key.len() == 9 + 64);
        assert_ne!(key, new_provisioner_key());
        assert_eq!(
            token_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
