//! Running Terraform for a build: one invocation with a controlled environment
//! (the build's variables, no `ABODE_*` or `TF_*` leaking in from the server's
//! own environment), how a run ends, and short runs whose output is captured
//! (`terraform show -json`). Long runs that stream their output and must
//! survive the server are in [`crate::supervise`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;

use tokio::process::Command;

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

    /// Terraform's subcommand (`plan`, `apply`, ...), for records and messages.
    pub fn subcommand(&self) -> String {
        self.args
            .first()
            .map(|arg| arg.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    pub(crate) fn command(&self) -> Command {
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
            .stdin(Stdio::null());
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
    #[error("cannot keep the record of a Terraform run in the work dir: {0}")]
    Record(#[source] std::io::Error),
    #[error("terraform {command} failed: {message}")]
    Failed { command: String, message: String },
}

/// Runs Terraform to completion and returns its standard output (for
/// `terraform show -json`); a failure carries Terraform's first error line.
pub async fn capture(invocation: &Invocation) -> Result<Vec<u8>, RunError> {
    let mut command = invocation.command();
    // Short and read through pipes: nothing to keep if its caller goes away.
    command.kill_on_drop(true);
    let output = command.output().await.map_err(RunError::Missing)?;
    if output.status.success() {
        return Ok(output.stdout);
    }
    Err(RunError::Failed {
        command: invocation.subcommand(),
        message: first_error_line(&output.stderr),
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
