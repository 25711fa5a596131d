//! Running Terraform for a build: asynchronous, streaming, cancellable.
//!
//! The provisioner needs three things the blocking helpers of this crate do not
//! give: every output line as soon as Terraform prints it (so a user following
//! the build sees progress live), a way to interrupt a run the way a person at a
//! terminal would (SIGINT, so Terraform can stop its providers and write its
//! state) with a hard kill if it does not stop in time, and a controlled
//! environment (the build's variables, no `ABODE_*` or `TF_*` leaking in from
//! the server's own environment).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::Command;
use tokio::sync::{mpsc, watch};

/// Variables of the server's own environment that would change what Terraform
/// does behind the build's back; the build sets its own where it needs them.
const INHERITED_PREFIXES_REMOVED: &[&str] = &["ABODE_", "TF_"];

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One line Terraform printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputLine {
    pub stream: Stream,
    pub text: String,
}

/// One Terraform invocation.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// Arguments after `terraform`.
    pub args: Vec<OsString>,
    /// The directory Terraform runs in (the build's private work dir).
    pub dir: PathBuf,
    /// The build's environment, on top of the cleaned inherited one.
    pub env: Vec<(String, String)>,
}

impl Invocation {
    pub fn new<I, S>(dir: impl Into<PathBuf>, args: I, env: &[(String, String)]) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Invocation {
            args: args.into_iter().map(Into::into).collect(),
            dir: dir.into(),
            env: env.to_vec(),
        }
    }

    fn command(&self) -> Command {
        let mut command = Command::new("terraform");
        for (key, _) in std::env::vars_os() {
            let removed = key.to_str().is_some_and(|key| {
                INHERITED_PREFIXES_REMOVED
                    .iter()
                    .any(|p| key.starts_with(p))
            });
            if removed {
                command.env_remove(&key);
            }
        }
        command
            .args(&self.args)
            .current_dir(&self.dir)
            .envs(crate::AUTOMATION_ENV.iter().copied())
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }
}

/// How a streamed run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Terraform exited by itself.
    Exited { success: bool, code: Option<i32> },
    /// The run was canceled; Terraform stopped after SIGINT (`killed: false`)
    /// or had to be killed after the grace period (`killed: true`).
    Canceled { killed: bool },
}

/// Why Terraform could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("terraform is not installed or not on PATH (Abode needs Terraform 1.x): {0}")]
    Missing(#[source] std::io::Error),
    #[error("waiting for terraform failed: {0}")]
    Wait(#[source] std::io::Error),
    #[error("terraform {command} failed: {message}")]
    Failed { command: String, message: String },
}

/// Runs Terraform, sending each output line to `lines` as it is printed.
///
/// When `cancel` turns true, Terraform gets SIGINT; if it has not exited after
/// `grace`, it is killed. Lines already printed are still delivered.
pub async fn stream(
    invocation: &Invocation,
    lines: mpsc::UnboundedSender<OutputLine>,
    mut cancel: watch::Receiver<bool>,
    grace: Duration,
) -> Result<Outcome, RunError> {
    let mut command = invocation.command();
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().map_err(RunError::Missing)?;
    let stdout = child
        .stdout
        .take()
        .map(|s| forward(s, Stream::Stdout, lines.clone()));
    let stderr = child
        .stderr
        .take()
        .map(|s| forward(s, Stream::Stderr, lines));

    let already_canceled = *cancel.borrow();
    let outcome = if already_canceled {
        interrupt(&mut child, grace).await?
    } else {
        tokio::select! {
            status = child.wait() => {
                let status = status.map_err(RunError::Wait)?;
                Outcome::Exited { success: status.success(), code: status.code() }
            }
            _ = wait_for_cancel(&mut cancel) => interrupt(&mut child, grace).await?,
        }
    };
    // The readers end when Terraform closes its pipes; wait so that no line is
    // lost after the caller sees the outcome.
    for reader in [stdout, stderr].into_iter().flatten() {
        let _ = reader.await;
    }
    Ok(outcome)
}

/// Runs Terraform to completion and returns its standard output (for
/// `terraform show -json`); a failure carries Terraform's first error line.
pub async fn capture(invocation: &Invocation) -> Result<Vec<u8>, RunError> {
    let mut command = invocation.command();
    let output = command.output().await.map_err(RunError::Missing)?;
    if output.status.success() {
        return Ok(output.stdout);
    }
    let command = invocation
        .args
        .first()
        .map(|arg| arg.to_string_lossy().into_owned())
        .unwrap_or_default();
    Err(RunError::Failed {
        command,
        message: first_error_line(&output.stderr),
    })
}

async fn wait_for_cancel(cancel: &mut watch::Receiver<bool>) {
    loop {
        if *cancel.borrow_and_update() {
            return;
        }
        if cancel.changed().await.is_err() {
            // The sender is gone: nobody can cancel any more.
            std::future::pending::<()>().await;
        }
    }
}

async fn interrupt(
    child: &mut tokio::process::Child,
    grace: Duration,
) -> Result<Outcome, RunError> {
    if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
        // The process may have exited already: then there is nothing to stop.
        let _ = signal::kill(Pid::from_raw(pid), Signal::SIGINT);
    }
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => {
            status.map_err(RunError::Wait)?;
            Ok(Outcome::Canceled { killed: false })
        }
        Err(_) => {
            let _ = child.kill().await;
            Ok(Outcome::Canceled { killed: true })
        }
    }
}

fn forward<R>(
    reader: R,
    stream: Stream,
    lines: mpsc::UnboundedSender<OutputLine>,
) -> tokio::task::JoinHandle<()>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut reader = BufReader::new(reader);
        let mut buffer = Vec::new();
        loop {
            buffer.clear();
            match reader.read_until(b'\n', &mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&buffer)
                        .trim_end_matches(['\n', '\r'])
                        .to_string();
                    if lines.send(OutputLine { stream, text }).is_err() {
                        break;
                    }
                }
            }
        }
    })
}

/// Terraform's diagnostics are boxed (`╷ │ Error: ...`); the `Error:` line is
/// the one a user needs, else the first non-empty line.
pub fn first_error_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let mut lines = text
        .lines()
        .map(|line| line.trim_start_matches(['│', '╷', '╵', ' ']).trim())
        .filter(|line| !line.is_empty());
    let all: Vec<&str> = lines.by_ref().collect();
    all.iter()
        .find(|line| line.starts_with("Error:"))
        .or(all.first())
        .map(|line| line.to_string())
        .unwrap_or_else(|| "no output".to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn first_error_line_prefers_the_error_line() {
        let stderr = "\n╷\n│ Error: Unsupported block type\n│ \n│   on main.tf line 1\n╵\n";
        assert_eq!(
            first_error_line(stderr.as_bytes()),
            "Error: Unsupported block type"
        );
        assert_eq!(first_error_line(b"plain\n"), "plain");
        assert_eq!(first_error_line(b""), "no output");
    }
}
