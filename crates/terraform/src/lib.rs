//! The only place in Abode that runs the `terraform` binary.
//!
//! Everything else (the CLI, the provisioner) asks this crate to run Terraform, so
//! that the environment Terraform sees (its CLI configuration, the offline provider
//! mirror, automation flags) is decided in one place.

pub mod mirror;
pub mod run;
pub mod supervise;

use std::path::Path;

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
    cmd.envs(AUTOMATION_ENV.iter().copied());
    cmd
}

/// What every Terraform run gets: no checkpoint calls to the network, no
/// prompts, output meant for automation, and plugins without TLS.
///
/// Plugin TLS is off because it protects nothing here: every provider listens on
/// a unix socket in a directory only Abode's user can enter (go-plugin's own
/// providers, and ours through the patched tf-provider), and a process running as
/// that user can already replace the mirror's provider or edit the state. It cost
/// about 32 ms per plan (certificates generated at every provider start, two
/// handshakes).
pub(crate) const AUTOMATION_ENV: &[(&str, &str)] = &[
    ("CHECKPOINT_DISABLE", "1"),
    ("TF_IN_AUTOMATION", "1"),
    ("TF_INPUT", "0"),
    ("TF_DISABLE_PLUGIN_TLS", "1"),
];

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
