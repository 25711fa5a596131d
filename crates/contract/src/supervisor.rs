//! What the abode provider and the machine's process supervisor say to each
//! other, over the unix socket named by `ABODE_PROCESS_SUPERVISOR`.
//!
//! Terraform runs in a sandbox with its own PID namespace, which dies with
//! it: a workspace process (`abode_process`) forked there would die at the
//! end of the apply, and the provider could neither see nor stop one started
//! by an earlier build. So the provider asks the supervisor of the server (or
//! daemon) that runs the build, which starts the process in a sandbox of its
//! own and answers for it later. Both sides use these types, so a field is
//! never written under one name and read under another.
//!
//! One request per connection: a JSON object on one line, answered by one
//! JSON line.
//!
//! The provider never reaches the machine's socket: each build (or preview)
//! gets a socket of its own, opened by the runner on the machine's socket
//! for the build's workspace ([`open_build`]) in the build's work dir, and
//! `ABODE_PROCESS_SUPERVISOR` names that one. Whatever is asked on it is
//! asked for that workspace: a process is started as the workspace's, and
//! another workspace's process is, to it, a process that does not exist. A
//! template cannot forge the workspace: it is the socket's, fixed by the
//! platform before Terraform starts, and no sandbox shows the machine's
//! socket or another build's work dir.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// The largest request or answer line either side reads.
pub const MAX_LINE: usize = 1024 * 1024;

/// What the provider asks.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Start `command` (program and arguments, no shell) with exactly `env`,
    /// in `dir`: an `abode_volume`'s directory (or one inside it), which is
    /// the process's home and the only place it may write.
    Start {
        command: Vec<String>,
        env: Vec<(String, String)>,
        dir: String,
    },
    /// Whether the process `id` (from [`Reply::Started`]) still runs.
    Status { id: String },
    /// SIGTERM to the process and everything it started, SIGKILL to what is
    /// left after `grace_seconds`; its log is removed.
    Stop { id: String, grace_seconds: u64 },
    /// Remove the volume `dir` (an `abode_volume`'s destroy): done by the
    /// supervisor, since the volume belongs to its workspace's uid, and only
    /// for a volume of the asking build's workspace (or one no workspace
    /// has run in yet). Answered [`Reply::Stopped`].
    RemoveVolume { dir: String },
    /// The runner's, on the machine's socket only: listen on `socket` for
    /// the build of `workspace_id` while this connection stays open.
    Open {
        workspace_id: String,
        socket: String,
        /// The URL the workspace's agent dials: when it is a loopback
        /// address, the one port of the host a workspace's own network
        /// forwards to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_url: Option<String>,
        /// The workspace's own uid (`--workspace-uids`): its processes run
        /// as it and its volumes are given to it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uid: Option<u32>,
        /// The volumes (names) this build adopts from a deleted workspace:
        /// given to this workspace's uid.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        adopt: Vec<String>,
    },
}

/// What the supervisor answers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// `id` is `<pid>-<start time>` of the sandbox's outermost process.
    Started {
        id: String,
        pid: i64,
        log_path: String,
    },
    Status {
        running: bool,
    },
    Stopped,
    /// The build's socket listens, until the connection that asked closes.
    Opened,
    /// A refusal or failure, one line, safe to show in a build's log.
    Error {
        message: String,
    },
}

/// Why a call to the supervisor failed.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("cannot reach the process supervisor at {socket}: {reason}")]
    Unreachable { socket: String, reason: String },
    /// The request went out and no whole answer came back: the supervisor
    /// may or may not have done it.
    #[error("the process supervisor at {socket} went away before it answered: {reason}")]
    Lost { socket: String, reason: String },
    #[error("the process supervisor's answer cannot be read: {0}")]
    BadReply(String),
    #[error("the process supervisor refused to open a socket for the build: {0}")]
    Refused(String),
}

/// How long a call waits for a supervisor that went away to be back. The
/// supervisor lives in the server (or daemon) that runs the build, and a
/// server killed mid-apply leaves its Terraform running: when it restarts
/// it follows that apply and opens the build's socket again
/// (`abode_host::recovery`), so a resource the apply reaches meanwhile
/// waits for it rather than failing the apply.
pub const RESTART_PATIENCE: Duration = Duration::from_secs(60);

/// The first pause before a call is tried again, doubled up to a second.
const FIRST_RETRY: Duration = Duration::from_millis(50);

/// Sends one request and reads its answer. `timeout` bounds each read and
/// write (a stop waits for its grace: give it more). A supervisor that
/// cannot be reached is waited for up to [`RESTART_PATIENCE`]; one that
/// went away after the request was sent is asked again only when asking
/// twice does what asking once does (everything but a start).
pub fn call(socket: &Path, request: &Request, timeout: Duration) -> Result<Reply, SupervisorError> {
    call_with_patience(socket, request, timeout, RESTART_PATIENCE)
}

/// [`call`], waiting at most `patience` for the supervisor to be back.
pub fn call_with_patience(
    socket: &Path,
    request: &Request,
    timeout: Duration,
    patience: Duration,
) -> Result<Reply, SupervisorError> {
    let deadline = Instant::now() + patience;
    let mut pause = FIRST_RETRY;
    loop {
        match ask(socket, request, timeout) {
            Ok((reply, _)) => return Ok(reply),
            Err(error) if may_ask_again(&error, request) && Instant::now() + pause < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(error) => return Err(error),
        }
    }
}

/// Whether `request` may be sent again after `error`: nothing was read of
/// it, or doing it twice is doing it once.
fn may_ask_again(error: &SupervisorError, request: &Request) -> bool {
    match error {
        SupervisorError::Unreachable { .. } => true,
        SupervisorError::Lost { .. } => matches!(
            request,
            Request::Status { .. } | Request::Stop { .. } | Request::RemoveVolume { .. }
        ),
        SupervisorError::BadReply(_) | SupervisorError::Refused(_) => false,
    }
}

/// The build a socket is opened for ([`Request::Open`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildOf {
    pub workspace_id: String,
    pub agent_url: Option<String>,
    pub uid: Option<u32>,
    pub adopt: Vec<String>,
}

/// A build's own socket ([`Request::Open`]): it listens while this lives.
#[derive(Debug)]
pub struct BuildSocket {
    path: std::path::PathBuf,
    /// Closed when dropped: the supervisor then stops listening.
    _connection: UnixStream,
}

impl BuildSocket {
    /// What the build's `ABODE_PROCESS_SUPERVISOR` names.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Asks the machine's supervisor (at `machine`) to listen on `socket` for
/// a build of `workspace_id`, until the returned value is dropped.
pub fn open_build(
    machine: &Path,
    build: &BuildOf,
    socket: &Path,
    timeout: Duration,
) -> Result<BuildSocket, SupervisorError> {
    let request = Request::Open {
        workspace_id: build.workspace_id.clone(),
        socket: socket.display().to_string(),
        agent_url: build.agent_url.clone(),
        uid: build.uid,
        adopt: build.adopt.clone(),
    };
    match ask(machine, &request, timeout)? {
        (Reply::Opened, connection) => Ok(BuildSocket {
            path: socket.to_path_buf(),
            _connection: connection,
        }),
        (Reply::Error { message }, _) => Err(SupervisorError::Refused(message)),
        (other, _) => Err(SupervisorError::BadReply(format!("{other:?}"))),
    }
}

/// One request, its answer, and the connection (still open).
fn ask(
    socket: &Path,
    request: &Request,
    timeout: Duration,
) -> Result<(Reply, UnixStream), SupervisorError> {
    let unreachable = |reason: std::io::Error| SupervisorError::Unreachable {
        socket: socket.display().to_string(),
        reason: reason.to_string(),
    };
    let lost = |reason: String| SupervisorError::Lost {
        socket: socket.display().to_string(),
        reason,
    };
    let mut stream = UnixStream::connect(socket).map_err(unreachable)?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(unreachable)?;
    stream
        .set_write_timeout(Some(timeout))
        .map_err(unreachable)?;
    let mut line = serde_json::to_vec(request)
        .map_err(|error| SupervisorError::BadReply(error.to_string()))?;
    line.push(b'\n');
    // The supervisor acts on a whole line only: a write that failed left
    // nothing done.
    stream.write_all(&line).map_err(unreachable)?;
    let mut answer = Vec::new();
    // One line and nothing after it: no buffer keeps what is not read.
    BufReader::new((&stream).take_bounded())
        .read_until(b'\n', &mut answer)
        .map_err(|error| lost(error.to_string()))?;
    if !answer.ends_with(b"\n") && answer.len() < MAX_LINE {
        return Err(lost("the connection closed".into()));
    }
    let reply = serde_json::from_slice(&answer)
        .map_err(|error| SupervisorError::BadReply(error.to_string()))?;
    Ok((reply, stream))
}

/// A stream read no further than [`MAX_LINE`] bytes.
trait TakeBounded: Sized + std::io::Read {
    fn take_bounded(self) -> std::io::Take<Self> {
        self.take(MAX_LINE as u64)
    }
}

impl<R: std::io::Read> TakeBounded for R {}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A supervisor that reads each request and, for the first `drop`
    /// connections, closes without answering; then answers `stopped`.
    fn flaky_supervisor(dir: &Path, drop: usize) -> std::path::PathBuf {
        let socket = dir.join("s.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let mut stream = stream.unwrap();
                let mut line = Vec::new();
                BufReader::new(&stream)
                    .read_until(b'\n', &mut line)
                    .unwrap();
                if n >= drop {
                    stream.write_all(b"{\"reply\":\"stopped\"}\n").unwrap();
                }
            }
        });
        socket
    }

    #[test]
    fn only_what_is_safe_to_do_twice_is_asked_again_after_a_lost_answer() {
        let status = Request::Status { id: "1-2".into() };
        let start = Request::Start {
            command: vec!["true".into()],
            env: Vec::new(),
            dir: "/v/x".into(),
        };
        let remove = Request::RemoveVolume { dir: "/v/x".into() };
        let cases = [(&status, true), (&remove, true), (&start, false)];
        for (request, asked_again) in cases {
            let dir = tempfile::tempdir().unwrap();
            let socket = flaky_supervisor(dir.path(), 1);
            let reply = call_with_patience(
                &socket,
                request,
                Duration::from_secs(5),
                Duration::from_secs(5),
            );
            match reply {
                Ok(reply) => {
                    assert!(asked_again, "{request:?}");
                    assert_eq!(reply, Reply::Stopped);
                }
                Err(error) => {
                    assert!(!asked_again, "{request:?}: {error}");
                    assert!(matches!(error, SupervisorError::Lost { .. }), "{error}");
                }
            }
        }
    }

    #[test]
    fn a_supervisor_not_yet_back_is_waited_for_then_given_up_on() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("later.sock");
        let request = Request::Start {
            command: vec!["true".into()],
            env: Vec::new(),
            dir: "/v/x".into(),
        };
        let gone = call_with_patience(
            &socket,
            &request,
            Duration::from_secs(5),
            Duration::from_millis(200),
        );
        assert!(
            matches!(gone, Err(SupervisorError::Unreachable { .. })),
            "{gone:?}"
        );
        // Back while the call waits: even a start is sent (nothing of it
        // was read before).
        let calling = {
            let socket = dir.path().join("s.sock");
            std::thread::spawn(move || {
                call_with_patience(
                    &socket,
                    &request,
                    Duration::from_secs(5),
                    Duration::from_secs(30),
                )
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        flaky_supervisor(dir.path(), 0);
        assert_eq!(calling.join().unwrap().unwrap(), Reply::Stopped);
    }

    #[test]
    fn requests_and_replies_are_tagged_json() {
        let request = Request::Stop {
            id: "12-34".into(),
            grace_seconds: 10,
        };
        let text = serde_json::to_string(&request).unwrap();
        assert_eq!(text, r#"{"op":"stop","id":"12-34","grace_seconds":10}"#);
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), request);
        let reply: Reply = serde_json::from_str(r#"{"reply":"status","running":true}"#).unwrap();
        assert_eq!(reply, Reply::Status { running: true });
        let open = Request::Open {
            workspace_id: "w".into(),
            socket: "/s".into(),
            agent_url: None,
            uid: None,
            adopt: Vec::new(),
        };
        assert_eq!(
            serde_json::to_string(&open).unwrap(),
            r#"{"op":"open","workspace_id":"w","socket":"/s"}"#
        );
        let with_url =
            r#"{"op":"open","workspace_id":"w","socket":"/s","agent_url":"http://127.0.0.1:1"}"#;
        assert!(matches!(
            serde_json::from_str::<Request>(with_url).unwrap(),
            Request::Open { agent_url: Some(url), .. } if url == "http://127.0.0.1:1"
        ));
    }
}
