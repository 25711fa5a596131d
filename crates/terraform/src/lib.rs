//! The only place in Abode that runs the `terraform` binary.
//!
//! Everything else (the CLI, the provisioner) asks this crate to run Terraform, so
//! that the environment Terraform sees (its CLI configuration, the offline provider
//! mirror, automation flags) is decided in one place.
//!
//! # What a run gets
//!
//! Every run's environment is built from nothing (`env_clear`, the environment
//! contract, the passed variables) plus the automation settings:
//! `CHECKPOINT_DISABLE`, `TF_IN_AUTOMATION`, `TF_INPUT`,
//! `TF_DISABLE_PLUGIN_TLS` (why: the abode provider's docs), a generated CLI
//! configuration that names the provider's filesystem mirror for
//! `registry.terraform.io/abode/*` and `direct` for everything else, and a
//! complete `.terraform.lock.hcl` for the mirrored provider, so `init` neither
//! warns nor accepts a changed binary. Every provider of every run puts its
//! plugin socket in a directory of Abode's user that no one else may enter
//! (`<tmp>/abode-plugins-<uid>`, mode 0700, checked at start).
//! `is_working_file` says what is Terraform's own (`.terraform/`, the lock
//! file, state and backups), which template packing (client) and unpacking
//! (runner) both leave out.
//!
//! # Modules
//!
//! `environment.rs` is what every run's environment gets (the automation
//! settings, the plugin socket dir). `run.rs` is short runs whose output is
//! captured. `isolation.rs` puts a run in the sandbox (`abode-sandbox`): bwrap
//! with the build's work dir, the provider mirror, the Terraform binary, the
//! volumes dir, the supervisor's socket and `--terraform-mount`s; the build,
//! preview and push paths all pass their `Isolation` (`Invocation::isolated`). A sandboxed run's cancel reaches
//! Terraform itself (SIGINT to the group's `terraform`, not to bwrap, which
//! would die of it and leave Terraform running). There is no
//! `--die-with-parent`: a build's Terraform outlives a killed server; its
//! sandbox ends with it.
//!
//! `shell.rs` runs a template's own command (an `abode_protect`'s
//! `snapshot_command`) as a run is: sandboxed, its environment from nothing.
//!
//! `machine.rs` sets up a machine that runs builds (a server, a provisioner
//! daemon) at its start: the data dir private, this binary's provider in the
//! mirror (`mirror.rs`), the sandbox and its process supervisor; a machine
//! that cannot sandbox stops there with one line.
//!
//! `supervise.rs` supervises build runs so that they survive the server:
//! Terraform writes its output to files in the build's work dir (a pipe whose
//! reader died would kill it with SIGPIPE at a random point), runs in its own
//! process group, and is recorded in the work dir by pid and start time
//! (`terraform.run`) the moment it is spawned. `stream` tails the files into
//! log lines and cancels with SIGINT, then SIGKILL to the group after the
//! grace; `follow` does the same for a run a dead server left behind.
//!
//! # What it keeps
//!
//! - Only this crate spawns `terraform`.
//! - A Terraform run sees what its `Invocation` says and nothing else, in the
//!   sandbox unless the operator turned it off.
//! - No Terraform process of a build outlives it unnoticed: every build run is
//!   recorded (or found by its working directory) until it has exited, and what
//!   is left of its process group when it exits (a provider it could not stop)
//!   is killed.

mod environment;
pub mod isolation;
pub mod machine;
pub mod mirror;
pub mod run;
pub mod shell;
pub mod supervise;

use std::path::Path;

use environment::automation_env;
pub use environment::plugin_socket_dir;

/// Whether a path inside a configuration folder (relative to its root) is one
/// of Terraform's own working files rather than template source: the
/// `.terraform/` directory, the dependency lock file, state files and their
/// backups. They never travel with a template: the server initialises every
/// run against its own provider mirror (a pushed lock file would pin checksums
/// of another build of the provider; the server writes its own with
/// [`mirror::Mirror::write_lock_file`]), keeps the state itself, and state
/// carries secrets.
pub fn is_working_file(relative: &Path) -> bool {
    let name = relative
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    relative
        .components()
        .any(|part| part.as_os_str() == ".terraform")
        || name == mirror::LOCK_FILE
        || name.ends_with(".tfstate")
        || (name.contains(".tfstate.") && name.ends_with(".backup"))
}
use std::process::Command;

/// Why running Terraform failed.
#[derive(Debug, thiserror::Error)]
pub enum TerraformError {
    #[error("terraform is not installed or not on PATH (Abode needs Terraform 1.x): {0}")]
    Missing(#[source] std::io::Error),
    #[error("terraform {command} failed: {stderr}")]
    Failed { command: String, stderr: String },
}

/// A `terraform` command with the environment every Abode run uses: no
/// checkpoint calls, no prompts, automation-friendly output.
pub fn command() -> Command {
    let mut cmd = Command::new("terraform");
    cmd.envs(automation_env());
    cmd
}

/// `terraform version`, as one line, or a clear error when Terraform is missing.
pub fn version() -> Result<String, TerraformError> {
    let output = command()
        .arg("version")
        .output()
        .map_err(TerraformError::Missing)?;
    if !output.status.success() {
        return Err(TerraformError::Failed {
            command: "version".into(),
            stderr: first_line(&output.stderr),
        });
    }
    Ok(first_line(&output.stdout))
}

/// Converts a binary plan file to its JSON form with `terraform show -json`,
/// run from `working_dir` (the initialised configuration the plan was made in).
pub fn show_plan_json(plan_file: &Path, working_dir: &Path) -> Result<Vec<u8>, TerraformError> {
    let output = command()
        .current_dir(working_dir)
        .arg("show")
        .arg("-json")
        .arg("-no-color")
        .arg(plan_file)
        .output()
        .map_err(TerraformError::Missing)?;
    if !output.status.success() {
        return Err(TerraformError::Failed {
            command: "show -json".into(),
            stderr: run::first_error_line(&output.stderr),
        });
    }
    Ok(output.stdout)
}

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("")
        .to_string()
}
