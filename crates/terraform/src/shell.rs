//! A template's own command, run as a Terraform run is: in the sandbox (when
//! there is one), with an environment built from nothing but what the caller
//! gives, in a directory of its own. Abode runs one for an `abode_protect`'s
//! `snapshot_command` before it applies a confirmed destroy (issue 47).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use abode_sandbox::View;
use tokio::io::AsyncReadExt;

use crate::isolation::Isolation;

/// The most of a command's output kept (its end).
const KEPT_OUTPUT: usize = 4096;

/// One command to run.
pub struct ShellRun<'a> {
    pub isolation: Option<&'a Isolation>,
    /// Its working directory, private to it; bound read-write in the sandbox.
    pub dir: &'a Path,
    /// Given to `sh -c`.
    pub command: &'a str,
    /// Its whole environment (but the sandbox's home and user).
    pub env: Vec<(String, String)>,
    /// Killed after this long.
    pub timeout: Duration,
}

/// How it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutcome {
    /// Its exit status; `None` when a signal ended it (or the timeout).
    pub code: Option<i32>,
    pub timed_out: bool,
    /// The last 4 KiB of its standard output and error, together.
    pub output: String,
}

impl ShellOutcome {
    pub fn succeeded(&self) -> bool {
        self.code == Some(0)
    }

    /// Whether `sh` found no such command (its status 127).
    pub fn not_found(&self) -> bool {
        self.code == Some(127)
    }
}

/// Runs `sh -c COMMAND` to its end, or until the timeout.
pub async fn run_shell(run: ShellRun<'_>) -> std::io::Result<ShellOutcome> {
    let shell = PathBuf::from("/bin/sh");
    let args: Vec<OsString> = vec!["-c".into(), run.command.into()];
    let (program, args) = match run.isolation {
        Some(isolation) => {
            let view = View {
                read_only: isolation.read_only_paths().to_vec(),
                read_write: vec![run.dir.to_path_buf()],
                read_write_fds: Vec::new(),
                dir: run.dir.to_path_buf(),
                operator_mounts: true,
                run_as: None,
                etc_files: Vec::new(),
            };
            isolation.sandbox().wrap(&view, &shell, &args)
        }
        None => (shell, args),
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(run.dir)
        .env_clear()
        .envs(run.env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(isolation) = run.isolation {
        command.envs(isolation.env());
    }
    let mut child = command.spawn()?;
    let (mut stdout, mut stderr) = (child.stdout.take(), child.stderr.take());
    let read = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let read_out = async {
            if let Some(stdout) = stdout.as_mut() {
                let _ = stdout.read_to_end(&mut out).await;
            }
        };
        let read_err = async {
            if let Some(stderr) = stderr.as_mut() {
                let _ = stderr.read_to_end(&mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        out.extend_from_slice(&err);
        out
    };
    let ended = tokio::time::timeout(run.timeout, async {
        let output = read.await;
        let status = child.wait().await;
        (output, status)
    })
    .await;
    match ended {
        Ok((output, status)) => {
            let status = status?;
            let start = output.len().saturating_sub(KEPT_OUTPUT);
            Ok(ShellOutcome {
                code: status.code(),
                timed_out: false,
                output: String::from_utf8_lossy(&output[start..]).trim().to_string(),
            })
        }
        Err(_) => Ok(ShellOutcome {
            code: None,
            timed_out: true,
            output: String::new(),
        }),
    }
}
