//! The agent's web terminal sessions (docs/web-terminal.md): a login shell
//! on a terminal per person and session id, which outlives the stream
//! attached to it. A page reloaded, or a network that dropped, attaches
//! again with the same id and gets the output it missed from the session's
//! scrollback ([`abode_tunnel::terminal`] is the stream's protocol).
//!
//! One stream is attached to a session at a time: a newer one takes it
//! over and the older one ends. A session nobody is attached to is kept
//! for [`DETACHED_KEPT`], then its shell is hung up; a session whose shell
//! exits ends the stream attached to it (EOF after the last output).
//! Sessions are keyed by who connects as well as by id, so an id seen by
//! someone else opens nothing of another person's.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use abode_tunnel::terminal::{TerminalDecoder, TerminalInput, TerminalOpen};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use crate::ssh::SessionSettings;

/// How long a session nobody is attached to keeps its shell.
pub const DETACHED_KEPT: Duration = Duration::from_secs(5 * 60);
/// The output a session keeps for a client that reattaches.
const SCROLLBACK: usize = 512 * 1024;

type Key = (String, String);

/// Every terminal session of this agent.
#[derive(Default)]
pub struct Terminals {
    sessions: Mutex<HashMap<Key, Arc<Session>>>,
}

/// Where a session's output is: how many bytes the shell wrote, and
/// whether it is done writing.
#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    total: u64,
    ended: bool,
}

struct Session {
    input: tokio::sync::Mutex<pty_process::OwnedWritePty>,
    scrollback: Mutex<Scrollback>,
    progress: watch::Sender<Progress>,
    /// The generation of the newest attachment.
    attachments: watch::Sender<u64>,
    /// The shell's process group, hung up when the session is given up.
    group: Option<rustix::process::Pid>,
}

/// The most recent output, and the offset of its first byte.
#[derive(Debug, Default)]
struct Scrollback {
    bytes: VecDeque<u8>,
    start: u64,
}

impl Scrollback {
    fn push(&mut self, data: &[u8]) {
        self.bytes.extend(data);
        let over = self.bytes.len().saturating_sub(SCROLLBACK);
        if over > 0 {
            self.bytes.drain(..over);
            self.start += over as u64;
        }
    }

    fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }

    /// What is kept from `offset` on, and where it starts: at `offset`
    /// when that is still kept, else at the oldest kept byte (or at the
    /// end, for an offset past it).
    fn since(&self, offset: u64) -> (u64, Vec<u8>) {
        let from = offset.clamp(self.start, self.end());
        let skip = usize::try_from(from - self.start).unwrap_or(usize::MAX);
        (from, self.bytes.iter().skip(skip).copied().collect())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Terminals {
    /// Attaches `stream` to `user`'s session `open.session`, starting it
    /// when there is none, until the stream ends, the shell exits or a
    /// newer stream takes the session over.
    pub async fn attach<S>(
        self: &Arc<Self>,
        user: &str,
        open: &TerminalOpen,
        stream: S,
        settings: &SessionSettings,
    ) -> std::io::Result<()>
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let key = (user.to_string(), open.session.clone());
        let session = self.session(&key, open, settings)?;
        let generation = {
            let mut newest = 0;
            session.attachments.send_modify(|attachments| {
                *attachments += 1;
                newest = *attachments;
            });
            newest
        };
        let (reader, mut writer) = tokio::io::split(stream);
        let (from, _) = lock(&session.scrollback).since(open.offset);
        writer.write_all(&from.to_be_bytes()).await?;
        let mut replaced = session.attachments.subscribe();
        let ended = tokio::select! {
            result = send_output(&session, from, &mut writer) => result?,
            result = take_input(&session, reader) => { result?; false }
            _ = replaced.wait_for(|newest| *newest != generation) => false,
        };
        if !ended {
            self.keep_detached(key, session, generation);
        }
        Ok(())
    }

    /// The running session of `key`, or a new one.
    fn session(
        self: &Arc<Self>,
        key: &Key,
        open: &TerminalOpen,
        settings: &SessionSettings,
    ) -> std::io::Result<Arc<Session>> {
        let mut sessions = lock(&self.sessions);
        if let Some(session) = sessions.get(key) {
            if !session.progress.borrow().ended {
                return Ok(Arc::clone(session));
            }
        }
        let (session, output) = start(open, settings)?;
        sessions.insert(key.clone(), Arc::clone(&session));
        tokio::spawn(Arc::clone(self).read_output(key.clone(), Arc::clone(&session), output));
        Ok(session)
    }

    /// Copies the shell's output into the session until it ends, then
    /// forgets the session.
    async fn read_output(
        self: Arc<Self>,
        key: Key,
        session: Arc<Session>,
        mut output: pty_process::OwnedReadPty,
    ) {
        let mut buffer = vec![0u8; 32 * 1024];
        loop {
            match output.read(&mut buffer).await {
                // EIO once no process holds the terminal any more.
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let total = {
                        let mut scrollback = lock(&session.scrollback);
                        scrollback.push(&buffer[..n]);
                        scrollback.end()
                    };
                    session
                        .progress
                        .send_modify(|progress| progress.total = total);
                }
            }
        }
        // Forgotten before its end is announced: whoever sees the end (an
        // attached page, told the shell exited) finds no session of it.
        {
            let mut sessions = lock(&self.sessions);
            if sessions
                .get(&key)
                .is_some_and(|kept| Arc::ptr_eq(kept, &session))
            {
                sessions.remove(&key);
            }
        }
        session
            .progress
            .send_modify(|progress| progress.ended = true);
    }

    /// Keeps a session nobody is attached to for [`DETACHED_KEPT`]; hangs
    /// its shell up then unless someone attached meanwhile.
    fn keep_detached(self: &Arc<Self>, key: Key, session: Arc<Session>, generation: u64) {
        let terminals = Arc::clone(self);
        tokio::spawn(async move {
            let mut attachments = session.attachments.subscribe();
            let reattached = attachments.wait_for(|newest| *newest != generation);
            if tokio::time::timeout(DETACHED_KEPT, reattached)
                .await
                .is_ok()
            {
                return;
            }
            if let Some(group) = session.group {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::HUP);
            }
            let mut sessions = lock(&terminals.sessions);
            if sessions
                .get(&key)
                .is_some_and(|kept| Arc::ptr_eq(kept, &session))
            {
                sessions.remove(&key);
            }
        });
    }
}

/// Starts a login shell on a new terminal of `open`'s size; with a
/// command (an app's), the login shell runs that command instead.
fn start(
    open: &TerminalOpen,
    settings: &SessionSettings,
) -> std::io::Result<(Arc<Session>, pty_process::OwnedReadPty)> {
    let (pty, pts) = pty_process::open().map_err(std::io::Error::other)?;
    pty.resize(pty_process::Size::new(open.rows, open.cols))
        .map_err(std::io::Error::other)?;
    let shell = pty_process::Command::new(crate::ssh::shell());
    let shell = match &open.command {
        Some(app_command) => shell.arg("-lc").arg(app_command),
        None => shell.arg("-l"),
    };
    let mut command = shell
        .env_remove(abode_contract::AGENT_TOKEN)
        .envs(settings.env.iter())
        .env("TERM", "xterm-256color")
        .env("COLORTERM", "truecolor");
    if let Some(dir) = crate::ssh::working_dir(settings) {
        command = command.current_dir(dir);
    }
    let mut child = command.spawn(pts).map_err(std::io::Error::other)?;
    let group = child
        .id()
        .and_then(|pid| rustix::process::Pid::from_raw(pid as i32));
    // Reaped when it exits; the terminal's EOF is what ends the session.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    let (output, input) = pty.into_split();
    let session = Session {
        input: tokio::sync::Mutex::new(input),
        scrollback: Mutex::new(Scrollback::default()),
        progress: watch::channel(Progress::default()).0,
        attachments: watch::channel(0).0,
        group,
    };
    Ok((Arc::new(session), output))
}

/// Writes the session's output from `from` on; `true` once the shell
/// ended and everything it wrote was sent (the stream is then shut).
async fn send_output<W>(session: &Session, mut from: u64, writer: &mut W) -> std::io::Result<bool>
where
    W: AsyncWrite + Unpin,
{
    let mut progress = session.progress.subscribe();
    loop {
        let ended = progress.borrow_and_update().ended;
        let (start, bytes) = lock(&session.scrollback).since(from);
        from = start + bytes.len() as u64;
        if !bytes.is_empty() {
            writer.write_all(&bytes).await?;
        }
        if ended {
            writer.shutdown().await?;
            return Ok(true);
        }
        if progress.changed().await.is_err() {
            return Ok(true);
        }
    }
}

/// Applies the person's frames to the terminal until the stream ends.
async fn take_input<R>(session: &Session, mut reader: R) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
{
    let mut decoder = TerminalDecoder::default();
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let n = reader.read(&mut buffer).await?;
        if n == 0 {
            return Ok(());
        }
        decoder.push(&buffer[..n]);
        while let Some(input) = decoder.next_input().map_err(std::io::Error::other)? {
            let mut terminal = session.input.lock().await;
            match input {
                TerminalInput::Input(bytes) => terminal.write_all(&bytes).await?,
                TerminalInput::Resize { rows, cols } => terminal
                    .resize(pty_process::Size::new(rows.max(1), cols.max(1)))
                    .map_err(std::io::Error::other)?,
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_scrollback_keeps_the_newest_output_and_says_where_it_starts() {
        let mut scrollback = Scrollback::default();
        scrollback.push(b"hello ");
        scrollback.push(b"world");
        assert_eq!(scrollback.since(0), (0, b"hello world".to_vec()));
        assert_eq!(scrollback.since(6), (6, b"world".to_vec()));
        assert_eq!(scrollback.since(99), (11, Vec::new()));
        scrollback.push(&vec![b'x'; SCROLLBACK]);
        let (from, bytes) = scrollback.since(0);
        assert_eq!(from, 11);
        assert_eq!(bytes.len(), SCROLLBACK);
        assert_eq!(scrollback.end(), 11 + SCROLLBACK as u64);
    }

    /// Reads the output header and then until `needle` shows up; returns
    /// the header's offset and everything read.
    async fn read_until<R: AsyncRead + Unpin>(reader: &mut R, needle: &str) -> (u64, String) {
        let mut header = [0u8; 8];
        reader.read_exact(&mut header).await.unwrap();
        let mut seen = Vec::new();
        let mut buffer = [0u8; 4096];
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !String::from_utf8_lossy(&seen).contains(needle) {
            let n = tokio::time::timeout_at(deadline, reader.read(&mut buffer))
                .await
                .unwrap_or_else(|_| {
                    panic!("never saw {needle:?}: {}", String::from_utf8_lossy(&seen))
                })
                .unwrap();
            assert!(n > 0, "ended before {needle:?}");
            seen.extend_from_slice(&buffer[..n]);
        }
        (
            u64::from_be_bytes(header),
            String::from_utf8_lossy(&seen).into_owned(),
        )
    }

    type Attached = (
        tokio::io::ReadHalf<tokio::io::DuplexStream>,
        tokio::io::WriteHalf<tokio::io::DuplexStream>,
        tokio::task::JoinHandle<std::io::Result<()>>,
    );

    fn attach(terminals: &Arc<Terminals>, user: &str, session: &str) -> Attached {
        let open = TerminalOpen {
            session: session.into(),
            rows: 24,
            cols: 80,
            offset: 0,
            command: None,
        };
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let (terminals, user) = (Arc::clone(terminals), user.to_string());
        let handle = tokio::spawn(async move {
            let settings = SessionSettings {
                dir: None,
                env: Default::default(),
            };
            terminals.attach(&user, &open, theirs, &settings).await
        });
        let (reader, writer) = tokio::io::split(ours);
        (reader, writer, handle)
    }

    async fn type_line<W: AsyncWrite + Unpin>(writer: &mut W, line: &str) {
        let frame = TerminalInput::Input(format!("{line}\r").into_bytes()).encode();
        writer.write_all(&frame).await.unwrap();
    }

    /// What the shell prints for [`ASK_PID`], and the marker that ends it
    /// (which the echo of the typed line does not contain).
    const ASK_PID: &str = "echo $((6*7)) $$ $((5*5))x";
    const PID_SHOWN: &str = "25x";

    /// The shell's pid from the line `42 PID 25x` it printed. A prompt may
    /// precede it on the same line (the line can be typed, and echoed by the
    /// terminal, before the shell's first prompt), so the words are matched
    /// from the line's end.
    fn pid_of(text: &str) -> String {
        text.split(['\r', '\n'])
            .find_map(|line| {
                let words: Vec<&str> = line.split_whitespace().collect();
                match words.as_slice() {
                    [.., "42", pid, "25x"] if pid.bytes().all(|b| b.is_ascii_digit()) => {
                        Some((*pid).to_string())
                    }
                    _ => None,
                }
            })
            .unwrap_or_else(|| panic!("no pid in {text:?}"))
    }

    #[tokio::test]
    async fn a_session_outlives_its_stream_and_replays_what_was_missed() {
        let terminals = Arc::new(Terminals::default());
        let (mut reader, mut writer, attached) = attach(&terminals, "ada", "s1");
        type_line(&mut writer, ASK_PID).await;
        let (offset, first) = read_until(&mut reader, PID_SHOWN).await;
        assert_eq!(offset, 0);
        // The stream drops; the shell goes on.
        drop((reader, writer));
        attached.await.unwrap().unwrap();

        // Someone else with the same id gets a shell of their own.
        let (mut reader, mut writer, other) = attach(&terminals, "bob", "s1");
        type_line(&mut writer, &format!("{ASK_PID}; exit")).await;
        let (_, bobs) = read_until(&mut reader, PID_SHOWN).await;
        assert_ne!(pid_of(&bobs), pid_of(&first));
        // Read to the end: the stream ends once the shell has exited and
        // all it wrote was sent (dropped earlier, its last words would meet
        // a closed stream).
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).await.unwrap();
        drop((reader, writer));
        other.await.unwrap().unwrap();

        let (mut reader, mut writer, again) = attach(&terminals, "ada", "s1");
        let (offset, replayed) = read_until(&mut reader, PID_SHOWN).await;
        assert_eq!(offset, 0, "a page that saw nothing gets everything kept");
        assert_eq!(pid_of(&replayed), pid_of(&first));
        writer
            .write_all(
                &TerminalInput::Resize {
                    rows: 30,
                    cols: 100,
                }
                .encode(),
            )
            .await
            .unwrap();
        type_line(&mut writer, "stty size; exit").await;
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).await.unwrap();
        assert!(String::from_utf8_lossy(&rest).contains("30 100"));
        again.await.unwrap().unwrap();
        assert!(
            lock(&terminals.sessions).is_empty(),
            "an exited shell's session is gone"
        );
    }
}
