//! Running Terraform for a build: one invocation with a controlled environment
//! (the build's variables and what the operator chose to pass of the server's
//! environment, nothing else: the server's own configuration never reaches a
//! template), how a run ends, and short runs whose output is captured
//! (`terraform show -json`). Long runs that stream their output and must
//! survive the server are in [`crate::supervise`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;

use tokio::process::Command;

/// What every Terraform run keeps of the server's environment, whatever the
/// operator passes: what Terraform and a `local-exec` shell need to run.
pub const BASE_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
];

/// Prefixes no operator may pass: the build contract and Terraform's own
/// settings are the build's to set, and the server's configuration
/// (`ABODE_DATABASE_URL`, ...) is its own secret.
const RESERVED_PREFIXES: &[&str] = &["ABODE_", "TF_"];

/// A variable name or `PREFIX*` pattern that may not be passed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvPatternError {
    #[error("`{0}` is not a variable name or NAME_PREFIX* pattern (letters, digits and `_`)")]
    Invalid(String),
    #[error("`{0}` would pass the server's own or the build's variables (ABODE_*, TF_*) to templates; they are never passed")]
    Reserved(String),
}

/// Which of the server's environment variables reach Terraform runs (and
/// through them, providers and templates): [`BASE_ENV`] plus what the
/// operator names. Everything else the server has, its own configuration
/// included, stays out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassedEnv {
    /// Exact names, or prefixes when the pattern ended in `*`.
    patterns: Vec<(String, bool)>,
}

impl PassedEnv {
    /// `patterns`: names (`AWS_PROFILE`) or prefixes (`AWS_*`).
    pub fn new(patterns: &[String]) -> Result<PassedEnv, EnvPatternError> {
        let mut parsed = Vec::new();
        for pattern in patterns {
            let pattern = pattern.trim();
            let (name, prefix) = match pattern.strip_suffix('*') {
                Some(name) => (name, true),
                None => (pattern, false),
            };
            let valid = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if !valid {
                return Err(EnvPatternError::Invalid(pattern.chars().take(64).collect()));
            }
            let reserved = RESERVED_PREFIXES.iter().any(|reserved| {
                name.starts_with(reserved) || (prefix && reserved.starts_with(name))
            });
            if reserved {
                return Err(EnvPatternError::Reserved(pattern.to_string()));
            }
            parsed.push((name.to_string(), prefix));
        }
        Ok(PassedEnv { patterns: parsed })
    }

    pub fn passes(&self, name: &str) -> bool {
        BASE_ENV.contains(&name)
            || self.patterns.iter().any(|(pattern, prefix)| {
                if *prefix {
                    name.starts_with(pattern.as_str())
                } else {
                    name == pattern
                }
            })
    }

    /// The variables of this process's environment that pass, to give every
    /// Terraform run (read once: the server's environment does not change).
    pub fn from_process(&self) -> Vec<(String, String)> {
        std::env::vars_os()
            .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
            .filter(|(name, _)| self.passes(name))
            .collect()
    }
}

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
    /// The whole environment of the run (see [`PassedEnv`]), on top of
    /// which the automation settings are set.
    pub env: Vec<(String, String)>,
    /// The sandbox it runs in and the work dir it may write (`None`: the
    /// operator turned the sandbox off).
    pub isolation: Option<(std::sync::Arc<crate::isolation::Isolation>, PathBuf)>,
    /// A saved plan whose JSON a launched run writes to a file once it
    /// succeeded ([`Invocation::then_show_json`]).
    pub then_show: Option<(PathBuf, PathBuf)>,
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
            isolation: None,
            then_show: None,
        }
    }

    /// Asks for `terraform show -json PLAN` into `output` after this run, in
    /// the same sandbox and with the same provider, when the run is launched
    /// (`abode_contract::launch`); otherwise nothing is written, and the
    /// caller, finding no `output`, shows the plan itself.
    pub fn then_show_json(mut self, plan: PathBuf, output: PathBuf) -> Self {
        self.then_show = Some((plan, output));
        self
    }

    /// Runs it in `isolation`'s sandbox, seeing `work_dir` (which holds
    /// its directory) read-write; as it is when `isolation` is `None`.
    pub fn isolated(
        mut self,
        isolation: Option<&std::sync::Arc<crate::isolation::Isolation>>,
        work_dir: &std::path::Path,
    ) -> Self {
        self.isolation = isolation.map(|isolation| (isolation.clone(), work_dir.to_path_buf()));
        self
    }

    /// Terraform's subcommand (`plan`, `apply`, ...), for records and messages.
    pub fn subcommand(&self) -> String {
        self.args
            .first()
            .map(|arg| arg.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Terraform with exactly the invocation's environment (see
    /// [`PassedEnv`] for what a caller takes from its own) and the automation
    /// settings; nothing else of this process's environment.
    pub(crate) fn command(&self) -> Command {
        let mut command = match &self.isolation {
            None => {
                let mut command = Command::new("terraform");
                command.args(&self.args);
                command
            }
            Some((isolation, work_dir)) => {
                let (program, args) =
                    isolation.wrap(work_dir, &self.dir, &self.args, self.then_show.as_ref());
                let mut command = Command::new(program);
                command.args(args);
                command
            }
        };
        command
            .env_clear()
            .current_dir(&self.dir)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null());
        // Last, so that nothing passed on can undo it.
        command.envs(crate::environment::automation_env());
        if let Some((isolation, _)) = &self.isolation {
            command.envs(isolation.env());
        }
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
    fn only_the_base_and_named_variables_pass() {
        let passed = PassedEnv::new(&["AWS_*".into(), "GOOGLE_CREDENTIALS".into()]).unwrap();
        for (name, passes) in [
            ("PATH", true),
            ("HOME", true),
            ("AWS_SECRET_ACCESS_KEY", true),
            ("AWS", false),
            ("GOOGLE_CREDENTIALS", true),
            ("GOOGLE_CREDENTIALS_FILE", false),
            ("ABODE_DATABASE_URL", false),
            ("DATABASE_URL", false),
            ("TF_LOG", false),
        ] {
            assert_eq!(passed.passes(name), passes, "{name}");
        }
        for refused in [
            "ABODE_DATABASE_URL",
            "ABODE_*",
            "TF_*",
            "TF_LOG",
            "A*",
            "T*",
            "*",
        ] {
            assert!(PassedEnv::new(&[refused.into()]).is_err(), "{refused}");
        }
        for invalid in ["", "A-B", "1X", "A B", "A*B"] {
            assert!(
                matches!(
                    PassedEnv::new(&[invalid.into()]),
                    Err(EnvPatternError::Invalid(_))
                ),
                "{invalid}"
            );
        }
    }

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
