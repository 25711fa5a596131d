//! `abode ssh WS [-- COMMAND...]` and `abode ssh --stdio WS` (docs/ssh.md).
//!
//! Both open a connection of kind `ssh` into the workspace (a WebSocket
//! the server authorizes, audits and pipes to the workspace's agent, which
//! serves SSH on it). `--stdio` hands the raw SSH bytes to standard input
//! and output, for OpenSSH's `ProxyCommand`; without it, this command is
//! the SSH client: an interactive shell on a real terminal (raw mode, the
//! local `TERM`, window-size changes), or a command whose output and exit
//! status are the remote command's.
//!
//! The host key is not checked here: the bytes travel over the platform's
//! own authenticated connection to the workspace's agent, which holds the
//! key the platform gave it. OpenSSH users keep `known_hosts` checking (the
//! key is stable per workspace).

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use abode_agent::wsdial::{dial, into_stream, DialError, Socket};
use anyhow::Context;
use clap::Args;
use russh::client;
use russh::ChannelMsg;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a connection waits for the workspace's agent to come up (a
/// workspace just started).
const AGENT_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Args)]
pub struct SshArgs {
    /// The workspace (`name`, or `owner/name`).
    pub workspace: String,
    /// Connect standard input and output to the workspace's SSH server (for
    /// OpenSSH's ProxyCommand; `abode config-ssh` writes it).
    #[arg(long, conflicts_with_all = ["tty", "command"])]
    pub stdio: bool,
    /// Ask for a terminal even for a command (as `ssh -t`).
    #[arg(short = 't', long)]
    pub tty: bool,
    /// Which agent, in a workspace with several (its name in `abode show`).
    #[arg(long)]
    pub agent: Option<String>,
    /// The command to run instead of a shell (after `--`).
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// Opens a connection of `kind` into `workspace` with the CLI's session,
/// waiting a while for the agent of a workspace that is running or starting
/// but whose agent is not connected yet.
pub(crate) async fn connect(
    workspace: &str,
    kind: &str,
    port: Option<u16>,
    agent: Option<&str>,
) -> anyhow::Result<Socket> {
    let session = super::current_session()?.ok_or(abode_client::ClientError::NotLoggedIn)?;
    let path = abode_client::connect::workspace_connect_path(workspace, kind, port, agent);
    let deadline = Instant::now() + AGENT_WAIT;
    let mut told = false;
    loop {
        match dial(&session.url, &path, &session.token).await {
            Ok(socket) => return Ok(socket),
            Err(DialError::Refused {
                status: 409,
                message,
            }) if Instant::now() < deadline && coming_up(&session, workspace).await => {
                if !told {
                    eprintln!("abode: {}; waiting…", crate::output::visible(&message));
                    told = true;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => {
                return Err(error).with_context(|| format!("cannot connect to {workspace}"))
            }
        }
    }
}

/// Whether the workspace is running or on its way there (so its agent may
/// connect soon), as the API says.
async fn coming_up(session: &abode_client::config::Session, workspace: &str) -> bool {
    let client = abode_client::Client::new(&session.url, Some(session.token.clone()));
    let workspace = workspace.to_string();
    tokio::task::spawn_blocking(move || client.workspace(&workspace))
        .await
        .ok()
        .and_then(Result::ok)
        .is_some_and(|shown| matches!(shown.status.as_str(), "running" | "starting" | "pending"))
}

pub fn run(args: SshArgs) -> anyhow::Result<u8> {
    // One thread: the bytes go from a task to the next without waking
    // another thread (standard input and output of `--stdio` have theirs).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(async {
        let socket = connect(&args.workspace, "ssh", None, args.agent.as_deref()).await?;
        if args.stdio {
            stdio(socket).await.map(|()| 0)
        } else {
            session(socket, &args).await
        }
    });
    // Standard input is read on a blocking thread that may never return.
    runtime.shutdown_background();
    result
}

/// `--stdio`: bytes between standard input/output and the connection.
///
/// Standard input and output are read and written by a thread each, in
/// chunks of a whole message: tokio's own `stdin()`/`stdout()` hand every
/// 8 KiB to a blocking task of their own, a thread wake-up per 8 KiB that
/// held a copy through OpenSSH's `ProxyCommand` to half the throughput.
async fn stdio(socket: Socket) -> anyhow::Result<()> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;

    let (mut sink, mut source) = socket.split();
    let (to_remote, mut from_stdin) = tokio::sync::mpsc::channel::<Vec<u8>>(8);
    std::thread::Builder::new()
        .name("abode-stdin".into())
        .spawn(move || read_stdin(&to_remote))
        .context("cannot start reading standard input")?;
    let (to_stdout, from_remote) = tokio::sync::mpsc::channel::<Vec<u8>>(8);
    let writer = std::thread::Builder::new()
        .name("abode-stdout".into())
        .spawn(move || write_stdout(from_remote))
        .context("cannot start writing standard output")?;
    let upstream = async {
        while let Some(chunk) = from_stdin.recv().await {
            // What is already queued leaves in the same write.
            let mut sent = sink.feed(Message::Binary(chunk)).await;
            while sent.is_ok() {
                match from_stdin.try_recv() {
                    Ok(chunk) => sent = sink.feed(Message::Binary(chunk)).await,
                    Err(_) => break,
                }
            }
            if sent.is_err() || sink.flush().await.is_err() {
                return;
            }
        }
        // "No more from this side".
        let _ = sink.send(Message::Binary(Vec::new())).await;
    };
    let downstream = async {
        while let Some(Ok(message)) = source.next().await {
            let bytes = match message {
                // An empty message: the remote side is done.
                Message::Binary(bytes) if !bytes.is_empty() => bytes,
                Message::Binary(_) | Message::Close(_) => break,
                _ => continue,
            };
            if to_stdout.send(bytes).await.is_err() {
                break;
            }
        }
        drop(to_stdout);
    };
    // Done when the remote side is: OpenSSH may keep our stdin open.
    tokio::select! {
        () = downstream => {}
        () = async { upstream.await; std::future::pending::<()>().await } => {}
    }
    tokio::task::spawn_blocking(move || writer.join())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_else(|| Err(std::io::Error::other("the output thread failed")))
        .context("cannot write to standard output")
}

/// Reads standard input until its end, a chunk at a time.
fn read_stdin(to_remote: &tokio::sync::mpsc::Sender<Vec<u8>>) {
    let stdin = std::io::stdin();
    let mut buffer = vec![0u8; abode_agent::wsdial::CHUNK];
    loop {
        match rustix::io::read(&stdin, &mut buffer[..]) {
            Ok(0) => return,
            Ok(n) => {
                if to_remote.blocking_send(buffer[..n].to_vec()).is_err() {
                    return;
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return,
        }
    }
}

/// Writes what arrives to standard output, unbuffered (std's `Stdout` is
/// line-buffered: it would split binary data at its last newline).
fn write_stdout(mut from_remote: tokio::sync::mpsc::Receiver<Vec<u8>>) -> std::io::Result<()> {
    let stdout = std::io::stdout();
    while let Some(bytes) = from_remote.blocking_recv() {
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            match rustix::io::write(&stdout, rest) {
                Ok(n) => rest = &rest[n..],
                Err(rustix::io::Errno::INTR) => {}
                // The SSH client is gone (it exited, or was killed): the
                // end of the connection, not an error of ours.
                Err(rustix::io::Errno::PIPE) => return Ok(()),
                Err(error) => return Err(error.into()),
            }
        }
    }
    Ok(())
}

struct AcceptPlatformKey;

impl client::Handler for AcceptPlatformKey {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        _key: &russh::keys::PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        Ok(true)
    }
}

/// Puts the terminal in raw mode until dropped.
struct RawMode {
    saved: rustix::termios::Termios,
}

impl RawMode {
    fn enter() -> Option<RawMode> {
        let stdin = std::io::stdin();
        let saved = rustix::termios::tcgetattr(&stdin).ok()?;
        let mut raw = saved.clone();
        raw.make_raw();
        rustix::termios::tcsetattr(&stdin, rustix::termios::OptionalActions::Drain, &raw).ok()?;
        Some(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(
            std::io::stdin(),
            rustix::termios::OptionalActions::Drain,
            &self.saved,
        );
    }
}

fn window_size() -> (u32, u32) {
    rustix::termios::tcgetwinsize(std::io::stdout())
        .map(|size| (u32::from(size.ws_col), u32::from(size.ws_row)))
        .ok()
        .filter(|(cols, rows)| *cols > 0 && *rows > 0)
        .unwrap_or((80, 24))
}

/// Shell words joined as one command line (SSH carries a string).
fn command_line(words: &[String]) -> String {
    if let [one] = words {
        return one.clone();
    }
    words
        .iter()
        .map(|word| {
            if !word.is_empty()
                && word
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
            {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// An SSH session channel to the workspace's agent over `socket`.
async fn open_session(
    socket: Socket,
) -> anyhow::Result<(
    client::Handle<AcceptPlatformKey>,
    russh::Channel<client::Msg>,
)> {
    let config = Arc::new(client::Config {
        inactivity_timeout: None,
        ..Default::default()
    });
    let mut handle = client::connect_stream(config, into_stream(socket), AcceptPlatformKey)
        .await
        .context("the SSH handshake with the workspace's agent failed")?;
    let user = std::env::var("USER").unwrap_or_else(|_| "abode".into());
    let auth = handle
        .authenticate_none(user)
        .await
        .context("SSH authentication failed")?;
    if !auth.success() {
        anyhow::bail!("the workspace's agent refused the SSH session");
    }
    let channel = handle
        .channel_open_session()
        .await
        .context("cannot open an SSH session")?;
    Ok((handle, channel))
}

/// What the workspace's agent answers to the SSH subsystem `name` (its
/// whole output; a failure if it refuses the subsystem or fails).
pub(crate) async fn subsystem_output(socket: Socket, name: &str) -> anyhow::Result<Vec<u8>> {
    let (handle, mut channel) = open_session(socket).await?;
    channel.request_subsystem(true, name).await?;
    let mut output = Vec::new();
    let mut code = None;
    while let Some(message) = channel.wait().await {
        match message {
            ChannelMsg::Data { data } => output.extend_from_slice(&data),
            ChannelMsg::ExitStatus { exit_status } => code = Some(exit_status),
            ChannelMsg::Failure => {
                anyhow::bail!(
                    "the workspace's agent does not answer `{name}` (is it older than this CLI?)"
                )
            }
            ChannelMsg::Close => break,
            _ => {}
        }
    }
    let _ = handle
        .disconnect(russh::Disconnect::ByApplication, "", "en")
        .await;
    match code {
        Some(0) => Ok(output),
        Some(code) => anyhow::bail!("the workspace's agent failed `{name}` (exit status {code})"),
        None => {
            anyhow::bail!("the connection ended before the workspace's agent answered `{name}`")
        }
    }
}

/// The SSH client: a shell or a command, its exit status.
async fn session(socket: Socket, args: &SshArgs) -> anyhow::Result<u8> {
    let (handle, mut channel) = open_session(socket).await?;
    let on_terminal = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let want_tty = args.tty || (args.command.is_empty() && on_terminal);
    let mut raw = None;
    if want_tty {
        let term = std::env::var("TERM").unwrap_or_else(|_| "xterm-256color".into());
        let (cols, rows) = window_size();
        channel
            .request_pty(false, &term, cols, rows, 0, 0, &[])
            .await
            .context("cannot request a terminal")?;
        if on_terminal {
            raw = RawMode::enter();
        }
    }
    for name in ["LANG", "LC_ALL", "LC_CTYPE", "COLORTERM"] {
        if let Ok(value) = std::env::var(name) {
            let _ = channel.set_env(false, name, value).await;
        }
    }
    if args.command.is_empty() {
        channel.request_shell(true).await?;
    } else {
        channel.exec(true, command_line(&args.command)).await?;
    }
    let mut window_changes =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
            .context("cannot watch the terminal's size")?;
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let mut stderr = tokio::io::stderr();
    let mut buffer = vec![0u8; 32 * 1024];
    let mut stdin_open = true;
    let mut code: Option<u32> = None;
    // The size the other side last heard of: a resize is told before any
    // keystroke typed after it, even when the signal is seen after the
    // keystroke (a command typed right after a resize sees the new size).
    let mut told_size = window_size();
    loop {
        tokio::select! {
            biased;
            _ = window_changes.recv(), if want_tty => {
                let size = window_size();
                if size != told_size {
                    told_size = size;
                    let _ = channel.window_change(size.0, size.1, 0, 0).await;
                }
            }
            read = stdin.read(&mut buffer), if stdin_open => match read {
                Ok(0) | Err(_) => {
                    stdin_open = false;
                    let _ = channel.eof().await;
                }
                Ok(n) => {
                    if want_tty {
                        let size = window_size();
                        if size != told_size {
                            told_size = size;
                            let _ = channel.window_change(size.0, size.1, 0, 0).await;
                        }
                    }
                    if channel.data(&buffer[..n]).await.is_err() {
                        stdin_open = false;
                    }
                }
            },
            message = channel.wait() => match message {
                Some(ChannelMsg::Data { data }) => {
                    stdout.write_all(&data).await?;
                    stdout.flush().await?;
                }
                Some(ChannelMsg::ExtendedData { data, .. }) => {
                    stderr.write_all(&data).await?;
                    stderr.flush().await?;
                }
                Some(ChannelMsg::ExitStatus { exit_status }) => code = Some(exit_status),
                Some(ChannelMsg::ExitSignal { .. }) => code = code.or(Some(255)),
                Some(ChannelMsg::Close) | None => break,
                Some(_) => {}
            },
        }
    }
    drop(raw);
    let _ = handle
        .disconnect(russh::Disconnect::ByApplication, "", "en")
        .await;
    match code {
        Some(code) => Ok(u8::try_from(code).unwrap_or(255)),
        None => {
            eprintln!(
                "abode: the connection to {} ended without an exit status",
                args.workspace
            );
            Ok(255)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_quoted_as_a_shell_reads_them() {
        let cases: [(&[&str], &str); 4] = [
            (&["sh -c 'echo hi'"], "sh -c 'echo hi'"),
            (&["echo", "hello world"], "echo 'hello world'"),
            (&["printf", "%s", "it's"], "printf %s 'it'\\''s'"),
            (&["true", ""], "true ''"),
        ];
        for (words, expected) in cases {
            let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            assert_eq!(command_line(&words), expected);
        }
    }
}
