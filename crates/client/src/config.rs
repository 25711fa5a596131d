//! Where the CLI keeps its session (server URL and session token) between commands.
//!
//! The file lives in `ABODE_CONFIG_DIR` (default `$XDG_CONFIG_HOME/abode`, then
//! `~/.config/abode`) and is only readable by its owner because the token grants
//! the user's rights. `ABODE_URL` and `ABODE_TOKEN` override what the file says, so
//! scripts and CI can run without logging in.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// File name of the session inside the config directory.
pub const SESSION_FILE: &str = "session.json";

/// What `abode login` remembers.
#[derive(Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Session {
    /// Base URL of the server, e.g. `http://127.0.0.1:7080`.
    pub url: String,
    /// The session token; never printed.
    pub token: String,
    /// Who logged in, for `abode whoami`-style messages.
    #[serde(default)]
    pub username: Option<String>,
}

impl std::fmt::Debug for Session {
    // The token must not leak through `{:?}` in logs or error chains.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("url", &self.url)
            .field("token", &"(hidden)")
            .field("username", &self.username)
            .finish()
    }
}

/// The config directory, resolved from the environment through `env`
/// (a lookup function so tests need not touch the process environment).
pub fn config_dir_from(env: impl Fn(&str) -> Option<String>) -> Result<PathBuf, ConfigError> {
    let non_empty = |key: &str| env(key).filter(|value| !value.is_empty());
    if let Some(dir) = non_empty("ABODE_CONFIG_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = non_empty("XDG_CONFIG_HOME") {
        return Ok(PathBuf::from(dir).join("abode"));
    }
    if let Some(home) = non_empty("HOME") {
        return Ok(PathBuf::from(home).join(".config").join("abode"));
    }
    Err(ConfigError::NoConfigDir)
}

/// The config directory of this process's environment.
pub fn config_dir() -> Result<PathBuf, ConfigError> {
    config_dir_from(|key| std::env::var(key).ok())
}

/// Reads the stored session, `None` when nobody logged in yet.
pub fn load_session(dir: &Path) -> Result<Option<Session>, ConfigError> {
    let path = dir.join(SESSION_FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ConfigError::Read { path, source }),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|err| ConfigError::Invalid {
            path,
            reason: err.to_string(),
        })
}

/// Stores the session with mode 0600 (directory 0700), replacing any previous one
/// atomically so a crash never leaves half a file.
pub fn save_session(dir: &Path, session: &Session) -> Result<PathBuf, ConfigError> {
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ConfigError::Write { path, source }
    };
    fs::create_dir_all(dir).map_err(write_err(dir))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(write_err(dir))?;
    let path = dir.join(SESSION_FILE);
    let temp = dir.join(format!(".{SESSION_FILE}.{}.tmp", std::process::id()));
    let json = serde_json::to_vec_pretty(session).map_err(|err| ConfigError::Invalid {
        path: path.clone(),
        reason: err.to_string(),
    })?;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temp)
        .map_err(write_err(&temp))?;
    file.write_all(&json)
        .and_then(|()| file.sync_all())
        .map_err(write_err(&temp))?;
    // An existing temp file would keep its old mode; make sure.
    fs::set_permissions(&temp, fs::Permissions::from_mode(0o600)).map_err(write_err(&temp))?;
    fs::rename(&temp, &path).map_err(write_err(&path))?;
    Ok(path)
}

/// Removes the stored session; absent is fine.
pub fn clear_session(dir: &Path) -> Result<(), ConfigError> {
    let path = dir.join(SESSION_FILE);
    match fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(ConfigError::Write { path, source }),
    }
}

/// The session a command runs with: the stored one, with `ABODE_URL` and
/// `ABODE_TOKEN` (when set and non-empty) taking precedence field by field.
/// A stored token is only ever sent to the server it was issued by: with
/// `ABODE_URL` naming another server, `ABODE_TOKEN` is required.
pub fn effective_session(
    stored: Option<Session>,
    env: impl Fn(&str) -> Option<String>,
) -> Option<Session> {
    let url = env("ABODE_URL").filter(|value| !value.is_empty());
    let token = env("ABODE_TOKEN").filter(|value| !value.is_empty());
    let mut session = stored.unwrap_or_default();
    if let Some(url) = url {
        let same_server = url.trim_end_matches('/') == session.url.trim_end_matches('/');
        if !same_server {
            session.token.clear();
            session.username = None;
        }
        session.url = url;
    }
    if let Some(token) = token {
        session.token = token;
    }
    (!session.url.is_empty() && !session.token.is_empty()).then_some(session)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    type Env<'a> = &'a [(&'a str, &'a str)];
    type UrlAndToken<'a> = Option<(&'a str, &'a str)>;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |key| map.get(key).cloned()
    }

    #[test]
    fn config_dir_precedence() {
        let cases: &[(Env, Option<&str>)] = &[
            (
                &[
                    ("ABODE_CONFIG_DIR", "/a"),
                    ("XDG_CONFIG_HOME", "/x"),
                    ("HOME", "/h"),
                ],
                Some("/a"),
            ),
            (
                &[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")],
                Some("/x/abode"),
            ),
            (
                &[("ABODE_CONFIG_DIR", ""), ("HOME", "/h")],
                Some("/h/.config/abode"),
            ),
            (&[], None),
        ];
        for (env, expected) in cases {
            let got = config_dir_from(env_of(env)).ok();
            assert_eq!(got, expected.map(PathBuf::from), "env {env:?}");
        }
    }

    #[test]
    fn session_roundtrip_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("nested").join("abode");
        assert_eq!(load_session(&config).unwrap(), None);
        let session = Session {
            url: "http://127.0.0.1:1".into(),
            token: "secret-token".into(),
            username: Some("alice".into()),
        };
        let path = save_session(&config, &session).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = fs::metadata(&config).unwrap().permissions().mode() & 0o777;
        assert_eq!(dir_mode, 0o700);
        assert_eq!(load_session(&config).unwrap(), Some(session));
        clear_session(&config).unwrap();
        assert_eq!(load_session(&config).unwrap(), None);
    }

    #[test]
    fn debug_hides_token() {
        let session = Session {
            url: "u".into(),
            token: "secret-token".into(),
            username: None,
        };
        assert!(!format!("{session:?}").contains("secret-token"));
    }

    #[test]
    fn corrupt_config_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(SESSION_FILE), "{not json").unwrap();
        let err = load_session(dir.path()).unwrap_err().to_string();
        assert!(err.contains("not valid JSON"), "{err}");
    }

    #[test]
    fn env_overrides_stored_session() {
        let stored = Session {
            url: "http://stored".into(),
            token: "stored-token".into(),
            username: Some("alice".into()),
        };
        let cases: &[(Env, UrlAndToken, bool)] = &[
            (&[], Some(("http://stored", "stored-token")), true),
            // The stored token never goes to another server.
            (&[("ABODE_URL", "http://env")], None, true),
            (
                &[("ABODE_URL", "http://stored/")],
                Some(("http://stored/", "stored-token")),
                true,
            ),
            (
                &[("ABODE_TOKEN", "env-token")],
                Some(("http://stored", "env-token")),
                true,
            ),
            (
                &[("ABODE_URL", "http://env"), ("ABODE_TOKEN", "env-token")],
                Some(("http://env", "env-token")),
                false,
            ),
            (&[("ABODE_URL", "http://env")], None, false),
        ];
        for (env, expected, with_stored) in cases {
            let base = with_stored.then(|| stored.clone());
            let got = effective_session(base, env_of(env));
            let got = got.as_ref().map(|s| (s.url.as_str(), s.token.as_str()));
            assert_eq!(got, *expected, "env {env:?} stored {with_stored}");
        }
    }
}
