//! The agent's SSH server: SSH on each stream the server opens for a
//! person (`abode ssh`, OpenSSH through `abode ssh --stdio`, editors'
//! remote extensions), with `russh`.
//!
//! Authentication is accepted as is (the `none` method): the stream exists
//! only because the server authenticated the person and authorized
//! `workspace.connect` on this workspace before opening it, over the
//! tunnel that the agent itself authenticated with its token. Nothing else
//! can reach this server: it listens on no port. The host key is the
//! workspace's, kept by the platform and handed over with each stream, so
//! `known_hosts` stays right across restarts.
//!
//! Sessions run as the agent's user, in the agent's `dir` with its `env`
//! (the agent token removed): a shell or a command, with a real PTY when
//! the client asks for one (its `TERM`, window size and changes), or pipes
//! (stdin, stdout, stderr, EOF) and the exit status. `direct-tcpip`
//! channels (OpenSSH's `-L` and `-W`) connect to ports inside the
//! workspace; `sftp` runs the system's `sftp-server` when there is one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use russh::server::{Auth, Handler, Msg, Session};
use russh::{Channel, ChannelId, ChannelMsg, MethodKind, MethodSet, Sig};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// Where sessions run.
#[derive(Debug, Clone)]
pub struct SessionSettings {
    /// The agent's `dir` (already expanded); the home directory otherwise.
    pub dir: Option<PathBuf>,
    /// The agent's `env`, added to the agent's own environment.
    pub env: BTreeMap<String, String>,
}

/// Where OpenSSH keeps the sftp subsystem on the systems Abode runs on.
const SFTP_SERVERS: [&str; 3] = [
    "/usr/lib/openssh/sftp-server",
    "/usr/libexec/openssh/sftp-server",
    "/usr/lib/ssh/sftp-server",
];

/// The ciphers offered, AES-GCM only. A client picks the first of its own
/// list that the server offers, and OpenSSH lists chacha20-poly1305 and the
/// CTR modes (with a separate MAC) first: offering them would have every
/// OpenSSH client use them. AES-GCM runs on the processor's AES and
/// carry-less multiply instructions on both ends (russh detects them at run
/// time, OpenSSH through OpenSSL), which makes a bulk copy markedly cheaper
/// than chacha20-poly1305; every OpenSSH since 6.2 (2013), PuTTY since 0.76
/// and russh speak it.
const CIPHERS: &[russh::cipher::Name] = &[russh::cipher::AES_128_GCM, russh::cipher::AES_256_GCM];

/// How much of a process's output is read (and sent) at once: a whole SSH
/// packet or more, not the 8 KiB of `tokio::io::copy`, which made a
/// download send four times the packets, frames and messages of an upload.
const OUTPUT_CHUNK: usize = 64 * 1024;

/// Environment variables a client may set (what OpenSSH's sshd accepts by
/// default, plus the colour hints terminals send).
fn accepted_env(name: &str) -> bool {
    name == "LANG" || name.starts_with("LC_") || name == "COLORTERM"
}

#[derive(Debug, thiserror::Error)]
pub enum SshError {
    #[error("the workspace's host key is not a 32-byte hex seed")]
    HostKey,
    #[error(transparent)]
    Ssh(#[from] russh::Error),
}

/// The host key from its seed (32 bytes, hex).
pub fn host_key(seed_hex: &str) -> Result<russh::keys::PrivateKey, SshError> {
    let bytes = hex::decode(seed_hex.trim()).map_err(|_| SshError::HostKey)?;
    let seed: [u8; 32] = bytes.try_into().map_err(|_| SshError::HostKey)?;
    let pair = russh::keys::ssh_key::private::Ed25519Keypair::from_seed(&seed);
    Ok(russh::keys::PrivateKey::from(pair))
}

/// Serves SSH on `stream` until the client disconnects.
pub async fn serve(
    stream: DuplexStream,
    seed_hex: &str,
    settings: Arc<SessionSettings>,
) -> Result<(), SshError> {
    let config = russh::server::Config {
        keys: vec![host_key(seed_hex)?],
        methods: MethodSet::from(&[MethodKind::None][..]),
        auth_rejection_time: Duration::ZERO,
        auth_rejection_time_initial: Some(Duration::ZERO),
        // A session may sit idle for hours (a terminal left open); the
        // tunnel's own pings tell a dead connection.
        inactivity_timeout: None,
        nodelay: true,
        preferred: russh::Preferred {
            cipher: std::borrow::Cow::Borrowed(CIPHERS),
            ..Default::default()
        },
        ..Default::default()
    };
    let session =
        russh::server::run_stream(Arc::new(config), stream, SshHandler { settings }).await?;
    session.await?;
    Ok(())
}

struct SshHandler {
    settings: Arc<SessionSettings>,
}

impl Handler for SshHandler {
    type Error = russh::Error;

    async fn auth_none(&mut self, _user: &str) -> Result<Auth, Self::Error> {
        Ok(Auth::Accept)
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: russh::server::ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        reply.accept().await;
        tokio::spawn(session_channel(channel, Arc::clone(&self.settings)));
        Ok(())
    }

    async fn channel_open_direct_tcpip(
        &mut self,
        channel: Channel<Msg>,
        host_to_connect: &str,
        port_to_connect: u32,
        _originator_address: &str,
        _originator_port: u32,
        reply: russh::server::ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        let Ok(port) = u16::try_from(port_to_connect) else {
            reply.reject(russh::ChannelOpenFailure::ConnectFailed).await;
            return Ok(());
        };
        match TcpStream::connect((host_to_connect, port)).await {
            Ok(mut tcp) => {
                let _ = tcp.set_nodelay(true);
                reply.accept().await;
                tokio::spawn(async move {
                    let mut stream = channel.into_stream();
                    let _ = tokio::io::copy_bidirectional_with_sizes(
                        &mut stream,
                        &mut tcp,
                        OUTPUT_CHUNK,
                        OUTPUT_CHUNK,
                    )
                    .await;
                });
            }
            Err(_) => reply.reject(russh::ChannelOpenFailure::ConnectFailed).await,
        }
        Ok(())
    }

    // The session's task reads these requests from its channel; the replies
    // are sent here.
    async fn pty_request(
        &mut self,
        channel: ChannelId,
        _term: &str,
        _col_width: u32,
        _row_height: u32,
        _pix_width: u32,
        _pix_height: u32,
        _modes: &[(russh::Pty, u32)],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn env_request(
        &mut self,
        channel: ChannelId,
        variable_name: &str,
        _variable_value: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        if accepted_env(variable_name) {
            session.channel_success(channel)
        } else {
            session.channel_failure(channel)
        }
    }

    async fn shell_request(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn exec_request(
        &mut self,
        channel: ChannelId,
        _data: &[u8],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn subsystem_request(
        &mut self,
        channel: ChannelId,
        name: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        if (name == "sftp" && sftp_server().is_some()) || name == crate::stat::SUBSYSTEM {
            session.channel_success(channel)
        } else {
            session.channel_failure(channel)
        }
    }

    async fn window_change_request(
        &mut self,
        _channel: ChannelId,
        _col_width: u32,
        _row_height: u32,
        _pix_width: u32,
        _pix_height: u32,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        Ok(())
    }
}

fn sftp_server() -> Option<&'static str> {
    SFTP_SERVERS
        .into_iter()
        .find(|path| Path::new(path).is_file())
}

/// What a session channel runs.
enum Program {
    Shell,
    Command(String),
    Sftp(&'static str),
    /// `abode stat WS`: the agent measures its workspace itself.
    Stat,
}

/// A PTY the client asked for.
struct PtyRequest {
    term: String,
    cols: u16,
    rows: u16,
}

fn clamp(value: u32) -> u16 {
    u16::try_from(value).unwrap_or(u16::MAX)
}

/// Gathers a session channel's requests until it asks for a program, then
/// runs it.
async fn session_channel(mut channel: Channel<Msg>, settings: Arc<SessionSettings>) {
    let mut pty = None;
    let mut env = Vec::new();
    while let Some(message) = channel.wait().await {
        let program = match message {
            ChannelMsg::RequestPty {
                term,
                col_width,
                row_height,
                ..
            } => {
                pty = Some(PtyRequest {
                    term,
                    cols: clamp(col_width),
                    rows: clamp(row_height),
                });
                continue;
            }
            ChannelMsg::SetEnv {
                variable_name,
                variable_value,
                ..
            } => {
                if accepted_env(&variable_name) {
                    env.push((variable_name, variable_value));
                }
                continue;
            }
            ChannelMsg::RequestShell { .. } => Program::Shell,
            ChannelMsg::Exec { command, .. } => {
                Program::Command(String::from_utf8_lossy(&command).into_owned())
            }
            ChannelMsg::RequestSubsystem { name, .. } if name == crate::stat::SUBSYSTEM => {
                Program::Stat
            }
            ChannelMsg::RequestSubsystem { name, .. } if name == "sftp" => match sftp_server() {
                Some(path) => Program::Sftp(path),
                None => continue,
            },
            _ => continue,
        };
        let pty = match program {
            Program::Sftp(_) | Program::Stat => None,
            _ => pty.take(),
        };
        let code = match run(&mut channel, program, pty, &env, &settings).await {
            Ok(code) => code,
            Err(error) => {
                let _ = channel
                    .extended_data_bytes(1, format!("abode agent: {error}\r\n").into_bytes())
                    .await;
                127
            }
        };
        let _ = channel.exit_status(code).await;
        let _ = channel.eof().await;
        let _ = channel.close().await;
        return;
    }
}

/// The user's login shell, as the agent's environment says.
pub(crate) fn shell() -> String {
    std::env::var("SHELL")
        .ok()
        .filter(|shell| !shell.is_empty())
        .unwrap_or_else(|| "/bin/sh".into())
}

/// The session's working directory: the agent's `dir` when it exists, else
/// the home directory.
pub(crate) fn working_dir(settings: &SessionSettings) -> Option<PathBuf> {
    settings
        .dir
        .clone()
        .filter(|dir| dir.is_dir())
        .or_else(|| std::env::var_os("HOME").map(PathBuf::from))
}

/// The program and its arguments.
fn command_line(program: &Program) -> (String, Vec<String>) {
    match program {
        Program::Shell => (shell(), vec!["-l".into()]),
        Program::Command(command) => (shell(), vec!["-c".into(), command.clone()]),
        Program::Sftp(path) => ((*path).to_string(), Vec::new()),
        Program::Stat => (String::new(), Vec::new()),
    }
}

/// Runs `program` on the channel; its exit status (128 + N for signal N).
async fn run(
    channel: &mut Channel<Msg>,
    program: Program,
    pty: Option<PtyRequest>,
    client_env: &[(String, String)],
    settings: &SessionSettings,
) -> std::io::Result<u32> {
    if let Program::Stat = program {
        return stat(channel, settings).await;
    }
    let (name, args) = command_line(&program);
    let dir = working_dir(settings);
    let mut env: Vec<(String, String)> = settings
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    env.extend(client_env.iter().cloned());
    match pty {
        Some(pty) => run_on_pty(channel, &name, &args, pty, env, dir).await,
        None => run_on_pipes(channel, &name, &args, env, dir).await,
    }
}

/// The `abode-stat` subsystem: the workspace measured (the agent and what
/// it started, its home), as one JSON document.
async fn stat(channel: &mut Channel<Msg>, settings: &SessionSettings) -> std::io::Result<u32> {
    let dir = settings.dir.clone();
    let stat = tokio::task::spawn_blocking(move || {
        let home = crate::stat::home(dir.as_deref());
        crate::stat::measure(std::process::id() as i32, home.as_deref())
    })
    .await
    .map_err(std::io::Error::other)?;
    let json = serde_json::to_vec(&stat).map_err(std::io::Error::other)?;
    channel
        .data(&json[..])
        .await
        .map_err(|error| std::io::Error::other(error.to_string()))?;
    Ok(0)
}

fn exit_code(status: std::process::ExitStatus) -> u32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .map(|code| code as u32)
        .or_else(|| status.signal().map(|signal| 128 + signal as u32))
        .unwrap_or(1)
}

/// Waits for the child on a task of its own; a message on the returned
/// sender signals its process group.
fn watch_child(
    mut child: tokio::process::Child,
) -> (
    tokio::sync::mpsc::UnboundedSender<rustix::process::Signal>,
    oneshot::Receiver<std::io::Result<std::process::ExitStatus>>,
) {
    let (signal_tx, mut signals) = tokio::sync::mpsc::unbounded_channel();
    let (done_tx, done) = oneshot::channel();
    let group = child
        .id()
        .and_then(|pid| rustix::process::Pid::from_raw(pid as i32));
    tokio::spawn(async move {
        let status = loop {
            tokio::select! {
                status = child.wait() => break status,
                signal = signals.recv() => match (signal, group) {
                    (Some(signal), Some(group)) => {
                        let _ = rustix::process::kill_process_group(group, signal);
                    }
                    (Some(_), None) => {}
                    // The channel is gone: hang up, and kill what stays.
                    (None, _) => {
                        if let Some(group) = group {
                            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::HUP);
                        }
                        match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
                            Ok(status) => break status,
                            Err(_) => {
                                let _ = child.start_kill();
                                break child.wait().await;
                            }
                        }
                    }
                },
            }
        };
        let _ = done_tx.send(status);
    });
    (signal_tx, done)
}

fn signal_of(signal: &Sig) -> Option<rustix::process::Signal> {
    use rustix::process::Signal;
    match signal {
        Sig::INT => Some(Signal::INT),
        Sig::TERM => Some(Signal::TERM),
        Sig::HUP => Some(Signal::HUP),
        Sig::KILL => Some(Signal::KILL),
        Sig::QUIT => Some(Signal::QUIT),
        Sig::USR1 => Some(Signal::USR1),
        _ => None,
    }
}

async fn run_on_pipes(
    channel: &mut Channel<Msg>,
    name: &str,
    args: &[String],
    env: Vec<(String, String)>,
    dir: Option<PathBuf>,
) -> std::io::Result<u32> {
    let mut command = tokio::process::Command::new(name);
    command
        .args(args)
        .env_remove(abode_contract::AGENT_TOKEN)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let mut child = command.spawn()?;
    let mut stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let mut out_writer = channel.make_writer();
    let mut err_writer = channel.make_writer_ext(Some(1));
    let output = tokio::spawn(async move {
        let out = async {
            if let Some(stdout) = stdout {
                let mut stdout = tokio::io::BufReader::with_capacity(OUTPUT_CHUNK, stdout);
                let _ = tokio::io::copy_buf(&mut stdout, &mut out_writer).await;
                let _ = out_writer.flush().await;
            }
        };
        let err = async {
            if let Some(stderr) = stderr {
                let mut stderr = tokio::io::BufReader::with_capacity(OUTPUT_CHUNK, stderr);
                let _ = tokio::io::copy_buf(&mut stderr, &mut err_writer).await;
                let _ = err_writer.flush().await;
            }
        };
        tokio::join!(out, err);
    });
    let (signals, mut done) = watch_child(child);
    let status = loop {
        tokio::select! {
            status = &mut done => break status,
            message = channel.wait() => match message {
                Some(ChannelMsg::Data { data }) => {
                    if let Some(pipe) = stdin.as_mut() {
                        if pipe.write_all(&data).await.is_err() {
                            stdin = None;
                        }
                    }
                }
                Some(ChannelMsg::Eof) => stdin = None,
                Some(ChannelMsg::Signal { signal }) => {
                    if let Some(signal) = signal_of(&signal) {
                        let _ = signals.send(signal);
                    }
                }
                Some(ChannelMsg::Close) | None => {
                    drop(signals);
                    break done.await;
                }
                Some(_) => {}
            },
        }
    };
    let _ = output.await;
    let status = status.map_err(|_| std::io::Error::other("the session's process was lost"))??;
    Ok(exit_code(status))
}

async fn run_on_pty(
    channel: &mut Channel<Msg>,
    name: &str,
    args: &[String],
    request: PtyRequest,
    env: Vec<(String, String)>,
    dir: Option<PathBuf>,
) -> std::io::Result<u32> {
    let (pty, pts) = pty_process::open().map_err(std::io::Error::other)?;
    pty.resize(pty_process::Size::new(request.rows, request.cols))
        .map_err(std::io::Error::other)?;
    let mut command = pty_process::Command::new(name)
        .args(args)
        .env_remove(abode_contract::AGENT_TOKEN)
        .envs(env)
        .env("TERM", &request.term);
    if let Some(dir) = dir {
        command = command.current_dir(dir);
    }
    let child = command.spawn(pts).map_err(std::io::Error::other)?;
    let (mut pty_read, mut pty_write) = pty.into_split();
    let mut out_writer = channel.make_writer();
    let output = tokio::spawn(async move {
        // Ends with EIO once no process holds the terminal any more.
        let mut buffer = vec![0u8; 32 * 1024];
        loop {
            match pty_read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if out_writer.write_all(&buffer[..n]).await.is_err() {
                        break;
                    }
                    let _ = out_writer.flush().await;
                }
            }
        }
    });
    let (signals, mut done) = watch_child(child);
    let status = loop {
        tokio::select! {
            status = &mut done => break status,
            message = channel.wait() => match message {
                Some(ChannelMsg::Data { data }) => {
                    let _ = pty_write.write_all(&data).await;
                }
                Some(ChannelMsg::WindowChange { col_width, row_height, .. }) => {
                    let _ = pty_write.resize(pty_process::Size::new(clamp(row_height), clamp(col_width)));
                }
                Some(ChannelMsg::Signal { signal }) => {
                    if let Some(signal) = signal_of(&signal) {
                        let _ = signals.send(signal);
                    }
                }
                Some(ChannelMsg::Close) | None => {
                    drop(signals);
                    break done.await;
                }
                Some(_) => {}
            },
        }
    };
    // What the shell printed last is still in the terminal: read it out,
    // but a background process holding the terminal does not keep the
    // session open.
    let _ = tokio::time::timeout(Duration::from_secs(2), output).await;
    drop(pty_write);
    let status = status.map_err(|_| std::io::Error::other("the session's process was lost"))??;
    Ok(exit_code(status))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_host_key_is_the_seed_s_and_nothing_else_is_a_key() {
        let seed = "11".repeat(32);
        let once = host_key(&seed).unwrap();
        let again = host_key(&seed).unwrap();
        assert_eq!(once.public_key(), again.public_key());
        assert_eq!(once.algorithm(), russh::keys::Algorithm::Ed25519);
        assert_ne!(
            host_key(&"22".repeat(32)).unwrap().public_key(),
            once.public_key()
        );
        for bad in ["", "zz", &"11".repeat(31), &"11".repeat(33)] {
            assert!(host_key(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn clients_set_only_locale_and_colour_variables() {
        let cases = [
            ("LANG", true),
            ("LC_ALL", true),
            ("COLORTERM", true),
            ("PATH", false),
            ("LD_PRELOAD", false),
            ("ABODE_AGENT_TOKEN", false),
        ];
        for (name, expected) in cases {
            assert_eq!(accepted_env(name), expected, "{name}");
        }
    }
}
