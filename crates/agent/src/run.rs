//! Running one script: `sh -c` in a directory with an environment (the
//! agent's token removed), its output in a log only its owner reads, a stop
//! request or a deadline ending it (with everything it started, in a process
//! group of its own). The startup, claim and shutdown scripts and the
//! `abode_script`s all run through here.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn log(message: &str) {
    eprintln!("abode agent: {message}");
}

/// How a startup script ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Startup {
    /// Exit status 0, or no script at all.
    Succeeded,
    /// A non-zero exit status (128 + N when killed by signal N, as shells say).
    Failed(i32),
    /// The script could not be started (no `sh`, a missing `dir`, ...).
    NotRun,
    /// The agent was told to stop while the script ran.
    Interrupted,
    /// It ran past its time and was killed (a shutdown script only).
    TimedOut,
}

/// `~` and `~/...` as in a shell, from `HOME`.
pub(crate) fn expand_home(dir: &str) -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match (dir, home) {
        ("~", Some(home)) => home,
        (dir, Some(home)) if dir.starts_with("~/") => home.join(&dir[2..]),
        (dir, _) => PathBuf::from(dir),
    }
}

/// Runs `script` with `sh -c` in `dir` (else the agent's own directory),
/// with `env` added to the agent's environment minus the agent token,
/// writing its output to `log_path` (replaced, mode 0600). A stop request
/// kills it; with a `deadline` the script runs in a process group of its
/// own, killed whole at the deadline.
pub(crate) fn run_script(
    script: &str,
    dir: Option<&Path>,
    env: &BTreeMap<String, String>,
    log_path: &Path,
    stop: &AtomicBool,
    deadline: Option<Instant>,
) -> Startup {
    let mut command = Command::new("sh");
    if deadline.is_some() {
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
    }
    command
        .arg("-c")
        .arg(script)
        .env_remove(abode_contract::AGENT_TOKEN)
        .envs(env)
        .stdin(Stdio::null());
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let mut log_file = match open_log(log_path) {
        Ok(file) => {
            let clones = file
                .try_clone()
                .and_then(|out| Ok((out, file.try_clone()?)));
            match clones {
                Ok((stdout, stderr)) => {
                    command.stdout(stdout).stderr(stderr);
                    Some(file)
                }
                Err(err) => {
                    log_unwritable(log_path, &err);
                    None
                }
            }
        }
        Err(err) => {
            log_unwritable(log_path, &err);
            None
        }
    };
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => {
            let place = dir
                .map(|dir| format!(" in {}", dir.display()))
                .unwrap_or_default();
            log(&format!("cannot run the startup script{place}: {err}"));
            if let Some(file) = log_file.as_mut() {
                // Best effort: the agent's own output already says it.
                let _ = writeln!(
                    file,
                    "abode agent: cannot run the startup script{place}: {err}"
                );
            }
            return Startup::NotRun;
        }
    };
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let code = status
                    .code()
                    .or_else(|| status.signal().map(|signal| 128 + signal))
                    .unwrap_or(1);
                return if code == 0 {
                    Startup::Succeeded
                } else {
                    Startup::Failed(code)
                };
            }
            Ok(None) if deadline.is_some_and(|deadline| Instant::now() >= deadline) => {
                kill_group(&mut child);
                return Startup::TimedOut;
            }
            Ok(None) if stop.load(Ordering::SeqCst) => {
                log("stopping the startup script");
                if deadline.is_some() {
                    kill_group(&mut child);
                } else {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Startup::Interrupted;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(err) => {
                log(&format!("cannot wait for the startup script: {err}"));
                return Startup::NotRun;
            }
        }
    }
}

/// Kills a script started in a process group of its own, and all it started.
fn kill_group(child: &mut std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // Best effort: a group already gone has nothing left to kill.
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The end of a script's log (at most `max` bytes), for the server.
pub(crate) fn log_tail(path: &Path, max: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let length = file.metadata().map(|meta| meta.len()).unwrap_or(0);
    if file
        .seek(SeekFrom::Start(length.saturating_sub(max)))
        .is_err()
    {
        return String::new();
    }
    let mut bytes = Vec::new();
    let _ = file.take(max).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The startup log, replaced on every start, readable by its owner only (a
/// script may print secrets of its own). The old file is removed and a new
/// one created exclusively, so that a link planted in a shared temporary
/// directory is never followed.
fn open_log(path: &Path) -> std::io::Result<File> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// Without a log file the script still runs; its output joins the agent's.
fn log_unwritable(path: &Path, err: &std::io::Error) {
    log(&format!(
        "cannot write the startup log {}: {err}; the script's output follows here",
        path.display()
    ));
}
