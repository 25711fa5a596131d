//! Build runs of Terraform that survive the server that started them.
//!
//! A server can die at any moment (SIGKILL, OOM, a power cut) while Terraform
//! is applying. Terraform must not die with it halfway through a resource, and
//! what it does after the server is gone must not be lost: a creation that
//! completes has to end up in the workspace's stored state, or the next build
//! creates it again. So a build's Terraform
//!
//! - writes its output to files in the work dir, not to pipes (a write to a
//!   pipe whose reader died kills Terraform with SIGPIPE at a random point);
//! - runs in its own process group, so the group (Terraform and its provider
//!   plugins) can be stopped as one, and a terminal's Ctrl-C meant for the
//!   server reaches Terraform only through the server's own cancel;
//! - is recorded in the work dir by pid *and* start time ([`RunRecord`]) as
//!   soon as it is spawned, so that a restarted server can tell whether that
//!   exact process still runs, follow its output and wait for it ([`follow`]).
//!
//! Output files are tailed every [`POLL`]; a line reaches the caller within
//! that time of Terraform printing it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use abode_procfs::Identity;
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use tokio::sync::{mpsc, watch};

use crate::run::{Invocation, Outcome, OutputLine, RunError, Stream};

/// How often output files are read and an adopted process is looked at.
pub const POLL: Duration = Duration::from_millis(50);

const RECORD_FILE: &str = "terraform.run";
const STDOUT_FILE: &str = "terraform.stdout";
const STDERR_FILE: &str = "terraform.stderr";

/// Where a build's Terraform run leaves its record and its output: one
/// directory per build (its work dir), one run at a time.
#[derive(Debug, Clone)]
pub struct RunRecord {
    dir: PathBuf,
}

/// A Terraform run found in a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRun {
    pub identity: Identity,
    /// Terraform's subcommand (`plan`, `apply`, ...).
    pub command: String,
}

impl RunRecord {
    pub fn in_dir(dir: impl Into<PathBuf>) -> RunRecord {
        RunRecord { dir: dir.into() }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The run this record names, if it names one and it can be read.
    pub fn read(&self) -> Option<RecordedRun> {
        let text = fs::read_to_string(self.path(RECORD_FILE)).ok()?;
        let (identity, command) = text.trim().split_once(' ')?;
        Some(RecordedRun {
            identity: Identity::parse(identity)?,
            command: command.to_string(),
        })
    }

    /// The recorded run when it still runs; else, a Terraform process whose
    /// working directory lies in the record's directory (the server may have
    /// died between spawning Terraform and writing the record).
    pub fn running(&self) -> Option<RecordedRun> {
        if let Some(run) = self.read().filter(|run| run.identity.is_running()) {
            return Some(run);
        }
        abode_procfs::running_in(&self.dir)
            .into_iter()
            .find(|(_, name)| name == "terraform")
            .map(|(identity, _)| RecordedRun {
                identity,
                command: "terraform".into(),
            })
    }

    /// Written whole or not at all (a rename), so a reader never sees half.
    fn write(&self, run: &RecordedRun) -> io::Result<()> {
        let partial = self.path(".terraform.run.partial");
        fs::write(
            &partial,
            format!("{} {}\n", run.identity.to_text(), run.command),
        )?;
        fs::rename(&partial, self.path(RECORD_FILE))
    }

    fn clear(&self) {
        let _ = fs::remove_file(self.path(RECORD_FILE));
    }

    fn output_file(&self, name: &str) -> io::Result<File> {
        OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(self.path(name))
    }
}

/// Runs Terraform under a [`RunRecord`], sending each output line to `lines`
/// as it is printed.
///
/// When `cancel` turns true, Terraform gets SIGINT; if it has not exited after
/// `grace`, its whole process group is killed. Lines already printed are still
/// delivered. Once Terraform has exited, anything left of its group (a
/// provider plugin it could not stop) is killed too.
pub async fn stream(
    invocation: &Invocation,
    record: &RunRecord,
    lines: mpsc::UnboundedSender<OutputLine>,
    cancel: watch::Receiver<bool>,
    grace: Duration,
) -> Result<Outcome, RunError> {
    let stdout = record.output_file(STDOUT_FILE).map_err(RunError::Record)?;
    let stderr = record.output_file(STDERR_FILE).map_err(RunError::Record)?;
    let mut command = invocation.command();
    command
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .process_group(0);
    let mut child = command.spawn().map_err(RunError::Missing)?;
    let pid = child.id().and_then(|id| i32::try_from(id).ok());
    let identity = pid.and_then(Identity::of);
    if let Some(identity) = identity {
        let run = RecordedRun {
            identity,
            command: invocation.subcommand(),
        };
        if let Err(error) = record.write(&run) {
            // Unrecorded, it could outlive a crash unnoticed: do not let it run.
            let _ = child.kill().await;
            return Err(RunError::Record(error));
        }
    }
    let mut output = Tails::new(record);
    let mut cancel = CancelWatch::new(cancel);
    let mut stop = Stop::new(grace);
    let status = loop {
        output.send_new(&lines, false);
        if let Some(status) = child.try_wait().map_err(RunError::Wait)? {
            break status;
        }
        if cancel.requested() {
            if let Some(pid) = pid {
                stop.escalate(pid);
            }
        }
        tokio::select! {
            _ = child.wait() => {}
            _ = cancel.changed() => {}
            _ = tokio::time::sleep(POLL) => {}
        }
    };
    output.send_new(&lines, true);
    if let Some(pid) = pid {
        kill_leftovers(pid);
    }
    record.clear();
    Ok(match stop.interrupted {
        Some(_) => Outcome::Canceled {
            killed: stop.killed,
        },
        None => Outcome::Exited {
            success: status.success(),
            code: status.code(),
        },
    })
}

/// How a followed run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Followed {
    /// No Terraform of this record was running: nothing to follow.
    NotRunning,
    /// It ran to its end (its exit status is its dead parent's to know).
    Ended(RecordedRun),
    /// It was interrupted (SIGINT, then the group killed after the grace).
    Canceled { run: RecordedRun, killed: bool },
}

/// Follows a Terraform run that a previous server process started and left
/// behind: every line of its output files (from the beginning) goes to
/// `lines`, and this returns once that exact process has ended. A cancel
/// interrupts it as [`stream`] would.
pub async fn follow(
    record: &RunRecord,
    lines: mpsc::UnboundedSender<OutputLine>,
    cancel: watch::Receiver<bool>,
    grace: Duration,
) -> Followed {
    let Some(run) = record.running() else {
        return Followed::NotRunning;
    };
    let mut output = Tails::new(record);
    let mut cancel = CancelWatch::new(cancel);
    let mut stop = Stop::new(grace);
    while run.identity.is_running() {
        output.send_new(&lines, false);
        if cancel.requested() {
            stop.escalate(run.identity.pid);
        }
        tokio::select! {
            _ = cancel.changed() => {}
            _ = tokio::time::sleep(POLL) => {}
        }
    }
    output.send_new(&lines, true);
    kill_leftovers(run.identity.pid);
    record.clear();
    match stop.interrupted {
        Some(_) => Followed::Canceled {
            run,
            killed: stop.killed,
        },
        None => Followed::Ended(run),
    }
}

/// A cancel switch that may be dropped by its sender (then nobody cancels).
struct CancelWatch {
    receiver: watch::Receiver<bool>,
    open: bool,
}

impl CancelWatch {
    fn new(receiver: watch::Receiver<bool>) -> CancelWatch {
        CancelWatch {
            receiver,
            open: true,
        }
    }

    fn requested(&self) -> bool {
        *self.receiver.borrow()
    }

    async fn changed(&mut self) {
        if self.open && self.receiver.changed().await.is_ok() {
            return;
        }
        self.open = false;
        std::future::pending::<()>().await;
    }
}

/// The interruption of a run: SIGINT to Terraform first (it stops its
/// providers and writes its state), SIGKILL to its group after the grace.
struct Stop {
    grace: Duration,
    interrupted: Option<Instant>,
    killed: bool,
}

impl Stop {
    fn new(grace: Duration) -> Stop {
        Stop {
            grace,
            interrupted: None,
            killed: false,
        }
    }

    fn escalate(&mut self, pid: i32) {
        match self.interrupted {
            None => {
                // It may have exited already: then there is nothing to stop.
                interrupt(pid);
                self.interrupted = Some(Instant::now());
            }
            Some(since) if !self.killed && since.elapsed() >= self.grace => {
                let _ = signal::killpg(Pid::from_raw(pid), Signal::SIGKILL);
                self.killed = true;
            }
            Some(_) => {}
        }
    }
}

/// SIGINT to the run's Terraform: the process Abode started when it is
/// Terraform itself, else (a sandbox: bwrap, which would die of it and leave
/// Terraform running) the processes named `terraform` in its group.
fn interrupt(group: i32) {
    let terraforms: Vec<i32> = abode_procfs::group_members(group)
        .into_iter()
        .filter(|(_, name)| name == "terraform")
        .map(|(identity, _)| identity.pid)
        .collect();
    if terraforms.is_empty() {
        let _ = signal::kill(Pid::from_raw(group), Signal::SIGINT);
    }
    for pid in terraforms {
        let _ = signal::kill(Pid::from_raw(pid), Signal::SIGINT);
    }
}

/// Terraform stops its plugins when it exits; one killed hard cannot, and
/// they must not outlive the build.
fn kill_leftovers(group: i32) {
    if abode_procfs::group_running(group) {
        let _ = signal::killpg(Pid::from_raw(group), Signal::SIGKILL);
    }
}

/// The read ends of a run's two output files.
struct Tails {
    files: [Tail; 2],
}

impl Tails {
    fn new(record: &RunRecord) -> Tails {
        Tails {
            files: [
                Tail::new(record.path(STDOUT_FILE), Stream::Stdout),
                Tail::new(record.path(STDERR_FILE), Stream::Stderr),
            ],
        }
    }

    /// Sends the complete lines written since the last call; at the `end`, a
    /// last line without its newline too.
    fn send_new(&mut self, lines: &mpsc::UnboundedSender<OutputLine>, end: bool) {
        for tail in &mut self.files {
            tail.read_new();
            for text in tail.take_lines(end) {
                // A receiver that is gone no longer wants lines; the run goes on.
                let _ = lines.send(OutputLine {
                    stream: tail.stream,
                    text,
                });
            }
        }
    }
}

struct Tail {
    path: PathBuf,
    stream: Stream,
    file: Option<File>,
    offset: u64,
    pending: Vec<u8>,
}

impl Tail {
    fn new(path: PathBuf, stream: Stream) -> Tail {
        Tail {
            path,
            stream,
            file: None,
            offset: 0,
            pending: Vec::new(),
        }
    }

    fn read_new(&mut self) {
        if self.file.is_none() {
            self.file = File::open(&self.path).ok();
        }
        let Some(file) = self.file.as_mut() else {
            return;
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        if let Ok(read) = file.read_to_end(&mut self.pending) {
            self.offset += read as u64;
        }
    }

    fn take_lines(&mut self, end: bool) -> Vec<String> {
        let mut lines = Vec::new();
        while let Some(newline) = self.pending.iter().position(|byte| *byte == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=newline).collect();
            lines.push(as_text(&line));
        }
        if end && !self.pending.is_empty() {
            lines.push(as_text(&std::mem::take(&mut self.pending)));
        }
        lines
    }
}

fn as_text(line: &[u8]) -> String {
    String::from_utf8_lossy(line)
        .trim_end_matches(['\n', '\r'])
        .to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn tails_return_whole_lines_and_the_last_partial_one_at_the_end() {
        let dir = std::env::temp_dir().join(format!("abode-tail-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out");
        fs::write(&path, "one\ntw").unwrap();
        let mut tail = Tail::new(path.clone(), Stream::Stdout);
        tail.read_new();
        assert_eq!(tail.take_lines(false), vec!["one"]);
        fs::write(&path, "one\ntwo\r\nthree").unwrap();
        tail.read_new();
        assert_eq!(tail.take_lines(false), vec!["two"]);
        assert_eq!(tail.take_lines(true), vec!["three"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn records_round_trip_and_a_dead_run_is_not_running() {
        let dir = std::env::temp_dir().join(format!("abode-record-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let record = RunRecord::in_dir(&dir);
        assert_eq!(record.read(), None);
        let me = Identity::of(i32::try_from(std::process::id()).unwrap()).unwrap();
        let run = RecordedRun {
            identity: me,
            command: "apply".into(),
        };
        record.write(&run).unwrap();
        assert_eq!(record.read(), Some(run.clone()));
        assert_eq!(record.running(), Some(run));
        let gone = RecordedRun {
            identity: Identity {
                start_ticks: me.start_ticks + 1,
                ..me
            },
            command: "apply".into(),
        };
        record.write(&gone).unwrap();
        assert_eq!(record.running(), None);
        record.clear();
        assert_eq!(record.read(), None);
        fs::remove_dir_all(&dir).unwrap();
    }
}
