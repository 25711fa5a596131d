//! People's linked-account tokens at rest: AES-256-GCM (ring) under a key
//! from `--external-auth-key-file`, so that a copy of the database (a
//! backup, a stolen disk) holds no usable token.
//!
//! A sealed token is one string, `v1:KEY_ID:NONCE_AND_CIPHERTEXT` (hex): the
//! key id (the first 16 hex digits of the key's SHA-256) says which key
//! opens it, so a rotation can re-encrypt row by row and a token sealed
//! under an unknown key is refused by name. What the token belongs to (its
//! person and provider) is the AEAD's associated data: a sealed token
//! copied into another person's row does not open there.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

/// The sealed format's version prefix.
const VERSION: &str = "v1";

/// Why a key could not be read, or a token not sealed or opened. One line
/// each; never any of a key's or a token's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CipherError {
    #[error("{path}: cannot read the external auth key: {reason}")]
    KeyUnreadable { path: PathBuf, reason: String },
    #[error("{path}: the external auth key is readable by others (mode {mode:o}): chmod 600 it")]
    KeyNotPrivate { path: PathBuf, mode: u32 },
    #[error("{path}: the external auth key must be 64 hex digits (32 random bytes: openssl rand -hex 32)")]
    KeyMalformed { path: PathBuf },
    #[error("a token sealed under key {key_id}, which is not this server's key ({current})")]
    UnknownKey { key_id: String, current: String },
    #[error("a stored token is not in the sealed format")]
    Malformed,
    #[error(
        "a stored token does not open: it was changed, or belongs to another person or provider"
    )]
    DoesNotOpen,
    #[error("the system's random source failed")]
    Random,
}

/// The key tokens are sealed with.
pub struct TokenCipher {
    key: LessSafeKey,
    key_id: String,
}

impl std::fmt::Debug for TokenCipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenCipher")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

/// Whose token a sealed value is: bound into the seal.
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    pub user_id: &'a str,
    pub provider_id: &'a str,
}

impl Owner<'_> {
    fn aad(&self) -> Vec<u8> {
        // The lengths keep ("ab", "c") and ("a", "bc") apart.
        format!(
            "abode-external-auth:{}:{}:{}:{}",
            self.user_id.len(),
            self.user_id,
            self.provider_id.len(),
            self.provider_id
        )
        .into_bytes()
    }
}

impl TokenCipher {
    /// The key in `path`: 64 hex digits (surrounding whitespace ignored),
    /// in a file only its owner may read.
    pub fn from_key_file(path: &Path) -> Result<TokenCipher, CipherError> {
        let unreadable = |reason: String| CipherError::KeyUnreadable {
            path: path.to_path_buf(),
            reason,
        };
        let metadata = std::fs::metadata(path).map_err(|error| unreadable(error.to_string()))?;
        let mode = metadata.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(CipherError::KeyNotPrivate {
                path: path.to_path_buf(),
                mode,
            });
        }
        let text = std::fs::read_to_string(path).map_err(|error| unreadable(error.to_string()))?;
        TokenCipher::from_hex(text.trim()).ok_or_else(|| CipherError::KeyMalformed {
            path: path.to_path_buf(),
        })
    }

    /// A key of 64 hex digits; `None` for anything else.
    pub fn from_hex(hex_key: &str) -> Option<TokenCipher> {
        if hex_key.len() != 64 {
            return None;
        }
        let bytes = hex::decode(hex_key).ok()?;
        let key = UnboundKey::new(&AES_256_GCM, &bytes).ok()?;
        let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
        Some(TokenCipher {
            key: LessSafeKey::new(key),
            key_id: hex::encode(&digest.as_ref()[..8]),
        })
    }

    /// Which key this is (stored beside each token).
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// `token` sealed for `owner`, with a fresh random nonce.
    pub fn seal(&self, token: &str, owner: Owner<'_>) -> Result<String, CipherError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| CipherError::Random)?;
        let mut sealed = token.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(owner.aad()),
                &mut sealed,
            )
            .map_err(|_| CipherError::Random)?;
        let mut stored = nonce.to_vec();
        stored.append(&mut sealed);
        Ok(format!("{VERSION}:{}:{}", self.key_id, hex::encode(stored)))
    }

    /// The key id a sealed value names (a rotation's way to find what is
    /// left under an old key).
    pub fn key_id_of(sealed: &str) -> Result<&str, CipherError> {
        let mut parts = sealed.splitn(3, ':');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(VERSION), Some(key_id), Some(_)) => Ok(key_id),
            _ => Err(CipherError::Malformed),
        }
    }

    /// The token `sealed` holds, if it was sealed under this key for
    /// `owner` and not changed since.
    pub fn open(&self, sealed: &str, owner: Owner<'_>) -> Result<String, CipherError> {
        let key_id = TokenCipher::key_id_of(sealed)?;
        if key_id != self.key_id {
            return Err(CipherError::UnknownKey {
                key_id: key_id.to_string(),
                current: self.key_id.clone(),
            });
        }
        let body = sealed.rsplit(':').next().ok_or(CipherError::Malformed)?;
        let bytes = hex::decode(body).map_err(|_| CipherError::Malformed)?;
        if bytes.len() < NONCE_LEN + AES_256_GCM.tag_len() {
            return Err(CipherError::Malformed);
        }
        let (nonce, ciphertext) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| CipherError::Malformed)?;
        let mut ciphertext = ciphertext.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(owner.aad()), &mut ciphertext)
            .map_err(|_| CipherError::DoesNotOpen)?;
        String::from_utf8(plain.to_vec()).map_err(|_| CipherError::DoesNotOpen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const OTHER_KEY: &str = "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    fn keyed(key: &str) -> TokenCipher {
        match TokenCipher::from_hex(key) {
            Some(cipher) => cipher,
            None => panic!("a good key was refused"),
        }
    }

    const ADA: Owner<'static> = Owner {
        user_id: "ada",
        provider_id: "github",
    };

    #[test]
    fn a_token_opens_only_under_its_key_for_its_owner_and_unchanged() {
        let cipher = keyed(KEY);
        let sealed = cipher.seal("gho_secret", ADA).unwrap_or_default();
        assert!(sealed.starts_with(&format!("v1:{}:", cipher.key_id())));
        assert!(!sealed.contains("gho_secret"));
        assert_eq!(cipher.open(&sealed, ADA), Ok("gho_secret".to_string()));
        // A fresh nonce every time.
        assert_ne!(cipher.seal("gho_secret", ADA).unwrap_or_default(), sealed);

        let elsewhere = [
            Owner {
                user_id: "bob",
                provider_id: "github",
            },
            Owner {
                user_id: "ada",
                provider_id: "gitlab",
            },
            // The lengths keep the two fields apart.
            Owner {
                user_id: "ad",
                provider_id: "agithub",
            },
        ];
        for owner in elsewhere {
            assert_eq!(
                cipher.open(&sealed, owner),
                Err(CipherError::DoesNotOpen),
                "{owner:?}"
            );
        }
        let other = keyed(OTHER_KEY);
        assert!(matches!(
            other.open(&sealed, ADA),
            Err(CipherError::UnknownKey { .. })
        ));
        // Any changed byte of the ciphertext, the tag or the nonce.
        let body_at = sealed.rfind(':').unwrap_or_default() + 1;
        for at in [body_at, body_at + 30, sealed.len() - 1] {
            let mut changed = sealed.clone().into_bytes();
            changed[at] = if changed[at] == b'0' { b'1' } else { b'0' };
            let changed = String::from_utf8(changed).unwrap_or_default();
            assert_eq!(
                cipher.open(&changed, ADA),
                Err(CipherError::DoesNotOpen),
                "at {at}"
            );
        }
        for malformed in ["", "v1", "v2:x:00", "v1:key:zz", "v1:key:00"] {
            let id_swapped = malformed.replace("key", cipher.key_id());
            assert!(cipher.open(&id_swapped, ADA).is_err(), "{malformed:?}");
        }
    }

    #[test]
    fn key_files_are_64_hex_digits_only_their_owner_reads() {
        let dir = std::env::temp_dir().join(format!("abode-key-test-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let write = |name: &str, text: &str, mode: u32| {
            let path = dir.join(name);
            let _ = std::fs::write(&path, text);
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode));
            path
        };
        let good = write("good", &format!("{KEY}\n"), 0o600);
        assert_eq!(
            TokenCipher::from_key_file(&good).map(|cipher| cipher.key_id().to_string()),
            Ok(keyed(KEY).key_id().to_string())
        );
        let open = write("open", KEY, 0o644);
        assert!(matches!(
            TokenCipher::from_key_file(&open),
            Err(CipherError::KeyNotPrivate { mode: 0o644, .. })
        ));
        for (name, text) in [
            ("short", "0011"),
            ("not-hex", &"g".repeat(64)),
            ("raw", "x"),
        ] {
            let path = write(name, text, 0o600);
            assert!(
                matches!(
                    TokenCipher::from_key_file(&path),
                    Err(CipherError::KeyMalformed { .. })
                ),
                "{name}"
            );
        }
        assert!(matches!(
            TokenCipher::from_key_file(&dir.join("absent")),
            Err(CipherError::KeyUnreadable { .. })
        ));
        // No error shows a key's bytes.
        let error = TokenCipher::from_key_file(&open)
            .err()
            .map(|e| e.to_string());
        assert!(!error.unwrap_or_default().contains(KEY));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
