//! Git credentials inside a workspace (docs/external-auth.md): the agent
//! hands its owner's linked-account tokens to `git` the moment it asks,
//! never through Terraform, an environment variable or a file.
//!
//! The agent listens on a Unix socket in a directory only its user may
//! enter, and names it in its sessions' environment
//! (`ABODE_AGENT_AUTH_SOCKET`), with `GIT_ASKPASS` set to the `abode`
//! binary. When Git asks for a user name or a password, it runs `abode
//! "Password for 'https://host': "`: the binary sees the prompt
//! ([`askpass_prompt`]), asks the agent over the socket ([`askpass`]), the
//! agent asks the server with its own token, and the answer goes to Git on
//! standard output. The agent's token
//! never leaves the agent; a session holds only the socket's path.
//! `abode external-auth access-token ID` asks the same way, by provider.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use abode_client::Client;
use abode_sdk::requests::AgentExternalAuthToken;
use abode_sdk::ExternalAuthToken;
use serde::{Deserialize, Serialize};

/// The longest request line a session may send.
const MAX_REQUEST: u64 = 16 * 1024;
/// How long a session waits for the agent (which waits for the server,
/// which may refresh the token at the provider: 15 s at most).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(40);

/// What the agent answers on its socket: one JSON line.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Token(ExternalAuthToken),
    Error(String),
}

/// Starts answering on a new socket in a new private directory; its path.
/// The directory goes when the agent stops.
pub fn serve(client: Client, stop: Arc<AtomicBool>) -> std::io::Result<PathBuf> {
    let dir = private_dir()?;
    let path = dir.join("git-auth.sock");
    let listener = UnixListener::bind(&path)?;
    listener.set_nonblocking(true)?;
    let client = Arc::new(client);
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((stream, _)) => {
                    let client = Arc::clone(&client);
                    std::thread::spawn(move || answer(&client, stream));
                }
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(error) => {
                    // The agent's own log line (its prefix), from below it.
                    eprintln!("abode agent: git credentials: accept failed: {error}");
                    std::thread::sleep(Duration::from_millis(250));
                }
            }
        }
        // Best effort: a stopped agent's socket answers nobody anyway.
        let _ = std::fs::remove_dir_all(&dir);
    });
    Ok(path)
}

/// A new directory only this user may enter, created exclusively (a name
/// someone else made first is skipped, never reused).
fn private_dir() -> std::io::Result<PathBuf> {
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let mut last_error = None;
    for attempt in 0..16u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.subsec_nanos())
            .unwrap_or_default();
        let dir = base.join(format!(
            "abode-agent-{}-{nanos:x}{attempt}",
            std::process::id()
        ));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(error) => last_error = Some(error),
        }
    }
    Err(last_error.unwrap_or_else(|| std::io::Error::other("no directory name was free")))
}

fn answer(client: &Client, stream: UnixStream) {
    let _ = stream.set_read_timeout(Some(ANSWER_TIMEOUT));
    let mut line = String::new();
    let read = BufReader::new((&stream).take(MAX_REQUEST)).read_line(&mut line);
    let reply = match read {
        Err(error) => Answer::Error(format!("cannot read the request: {error}")),
        Ok(_) => match serde_json::from_str::<AgentExternalAuthToken>(&line) {
            Err(error) => Answer::Error(format!("not a token request: {error}")),
            Ok(request) => match client.agent_external_auth_token(&request) {
                Ok(token) => Answer::Token(token),
                Err(error) => Answer::Error(error.to_string()),
            },
        },
    };
    if let Ok(mut text) = serde_json::to_string(&reply) {
        text.push('\n');
        // The asker may have gone (Git killed); nothing to tell anyone.
        let _ = (&stream).write_all(text.as_bytes());
    }
}

/// Why a session's question to the agent got no token.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("cannot reach the workspace's agent at {}: {error}", socket.display())]
    Unreachable {
        socket: PathBuf,
        error: std::io::Error,
    },
    #[error("{0}")]
    Socket(std::io::Error),
    #[error("{0}")]
    Request(serde_json::Error),
    #[error("cannot ask the workspace's agent: {0}")]
    Send(std::io::Error),
    #[error("the workspace's agent did not answer: {0}")]
    NoAnswer(std::io::Error),
    /// The agent's (or its server's) one line about why not.
    #[error("{0}")]
    Refused(String),
    #[error("the workspace's agent answered something else than a token")]
    Unreadable,
}

/// Asks the agent at `socket` for a token: of a provider by id, or of the
/// provider serving a Git URL.
pub fn ask(socket: &Path, request: &AgentExternalAuthToken) -> Result<ExternalAuthToken, AskError> {
    let mut stream = UnixStream::connect(socket).map_err(|error| AskError::Unreachable {
        socket: socket.to_path_buf(),
        error,
    })?;
    stream
        .set_read_timeout(Some(ANSWER_TIMEOUT))
        .map_err(AskError::Socket)?;
    let mut line = serde_json::to_string(request).map_err(AskError::Request)?;
    line.push('\n');
    stream.write_all(line.as_bytes()).map_err(AskError::Send)?;
    let mut reply = String::new();
    BufReader::new(stream.take(MAX_REQUEST))
        .read_line(&mut reply)
        .map_err(AskError::NoAnswer)?;
    match serde_json::from_str::<Answer>(&reply) {
        Ok(Answer::Token(token)) => Ok(token),
        Ok(Answer::Error(error)) => Err(AskError::Refused(error)),
        Err(_) => Err(AskError::Unreadable),
    }
}

/// The socket named by the environment, inside a workspace.
pub fn socket_from_env() -> Option<PathBuf> {
    std::env::var_os(abode_contract::AGENT_AUTH_SOCKET)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

/// What Git asks its askpass program for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    Username(String),
    Password(String),
}

/// Git's askpass prompt in `args` (the program's arguments after its
/// name): `Username for 'URL': ` or `Password for 'URL': `; `None` for any
/// other command line.
pub fn askpass_prompt(args: &[String]) -> Option<Prompt> {
    let [prompt] = args else {
        return None;
    };
    let (kind, rest) = prompt
        .strip_prefix("Username for '")
        .map(|rest| (true, rest))
        .or_else(|| {
            prompt
                .strip_prefix("Password for '")
                .map(|rest| (false, rest))
        })?;
    let url = rest.trim_end().strip_suffix("':")?.to_string();
    if url.is_empty() {
        return None;
    }
    Some(if kind {
        Prompt::Username(url)
    } else {
        Prompt::Password(url)
    })
}

/// The answer to Git's prompt: the user name or the token for its URL,
/// for the askpass program to print on standard output. An error (nothing
/// linked, no provider serving the URL) is for it to exit non-zero with,
/// which lets Git say it could not read the credentials.
pub fn askpass(socket: &Path, prompt: Prompt) -> Result<String, AskError> {
    let url = match &prompt {
        Prompt::Username(url) | Prompt::Password(url) => url.clone(),
    };
    // The user name needs no token: none is opened or handed out for it.
    let request = AgentExternalAuthToken {
        provider: None,
        git_url: Some(url),
        username_only: matches!(prompt, Prompt::Username(_)),
    };
    let token = ask(socket, &request)?;
    Ok(match prompt {
        Prompt::Username(_) => token.username,
        Prompt::Password(_) => token.access_token,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn git_prompts_are_recognised_and_nothing_else() {
        let cases: [(&[&str], Option<Prompt>); 9] = [
            (
                &["Username for 'https://git.example.com': "],
                Some(Prompt::Username("https://git.example.com".into())),
            ),
            (
                &["Password for 'https://oauth2@git.example.com': "],
                Some(Prompt::Password("https://oauth2@git.example.com".into())),
            ),
            (
                &["Password for 'http://127.0.0.1:8080':"],
                Some(Prompt::Password("http://127.0.0.1:8080".into())),
            ),
            (&["Username for '': "], None),
            (&["Username for 'https://x"], None),
            (
                &["Are you sure you want to continue connecting (yes/no)? "],
                None,
            ),
            (&["list"], None),
            (&["Username for 'https://x': ", "extra"], None),
            (&[], None),
        ];
        for (args, expected) in cases {
            let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
            assert_eq!(askpass_prompt(&args), expected, "{args:?}");
        }
    }

    #[test]
    fn the_socket_lives_in_a_directory_only_its_user_enters() {
        use std::os::unix::fs::PermissionsExt;
        let first = private_dir().unwrap();
        let second = private_dir().unwrap();
        assert_ne!(first, second);
        let mode = std::fs::metadata(&first).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::remove_dir(first).unwrap();
        std::fs::remove_dir(second).unwrap();
    }
}
