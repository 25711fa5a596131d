//! Private working directories for builds and template validation.
//!
//! A build's directory holds the unpacked template, its Terraform state and
//! its saved plan, any of which can carry secrets: directories are created
//! readable by the server's user only, and removed when the build ends.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use abode_terraform::mirror::Mirror;

/// The template's files go in `template/` under the work dir; the CLI
/// configuration and the plan file sit beside it, out of the template's way.
pub const TEMPLATE_SUBDIR: &str = "template";
pub const CLI_CONFIG_FILE: &str = "terraform.tfrc";
pub const PLAN_FILE: &str = "build.tfplan";
/// The saved plan's JSON, when the plan's own launch wrote it
/// (`abode_contract::launch`, `--then-show-json`).
pub const PLAN_JSON_FILE: &str = "build.tfplan.json";
pub const STATE_FILE: &str = "terraform.tfstate";
/// What Terraform writes in its working directory when the state backend
/// refused or could not take the state at the end of a command.
pub const ERRORED_STATE_FILE: &str = "errored.tfstate";

/// Creates `base/name` (and `base/name/template`), private to this user.
pub fn create(base: &Path, name: &str) -> io::Result<PathBuf> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true).mode(0o700);
    builder.create(base)?;
    fs::set_permissions(base, fs::Permissions::from_mode(0o700))?;
    let dir = base.join(name);
    if dir.exists() {
        fs::remove_dir_all(&dir)?;
    }
    builder.create(dir.join(TEMPLATE_SUBDIR))?;
    Ok(dir)
}

/// Writes the Terraform CLI configuration of a run into `dir` and returns its
/// path: the abode provider from the mirror, everything else direct.
pub fn write_cli_config(dir: &Path, mirror: Option<&Path>) -> Result<PathBuf, String> {
    let path = dir.join(CLI_CONFIG_FILE);
    match mirror {
        Some(root) => Mirror::new(root)
            .and_then(|mirror| mirror.write_cli_config(&path))
            .map_err(|error| error.to_string())?,
        // Without a mirror an explicit empty configuration still keeps the
        // machine's own (possibly broken) one out of the build.
        None => fs::write(
            &path,
            "# Written by Abode: no provider mirror configured.\n",
        )
        .map_err(|error| format!("cannot write {}: {error}", path.display()))?,
    }
    Ok(path)
}

/// Writes Terraform's dependency lock for the mirrored abode provider into a
/// configuration dir (see `Mirror::write_lock_file`); nothing without a mirror.
pub fn write_provider_lock(config_dir: &Path, mirror: Option<&Path>) -> Result<(), String> {
    let Some(root) = mirror else {
        return Ok(());
    };
    Mirror::new(root)
        .and_then(|mirror| {
            mirror.write_lock_file(abode_terraform::mirror::PROVIDER_VERSION, config_dir)
        })
        .map(|_| ())
        .map_err(|error| format!("cannot write the provider lock: {error}"))
}

/// Writes a file readable by the server's user only.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    fs::write(path, bytes)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
}

pub fn remove(dir: &Path) {
    if let Err(error) = fs::remove_dir_all(dir) {
        if error.kind() != io::ErrorKind::NotFound {
            tracing::warn!(dir = %dir.display(), %error, "cannot remove a work dir");
        }
    }
}

/// [`remove`], on a blocking thread (a work dir holds a whole template and
/// Terraform's providers).
pub async fn remove_off_runtime(dir: PathBuf) {
    let shown = dir.display().to_string();
    if let Err(error) = tokio::task::spawn_blocking(move || remove(&dir)).await {
        tracing::warn!(dir = %shown, %error, "cannot remove a work dir");
    }
}

/// Removes every work dir left by a previous run of the server but those in
/// `keep` (builds whose Terraform may still run or whose state is not stored).
pub fn clear_all_except(base: &Path, keep: &[PathBuf]) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        if !keep.contains(&entry.path()) {
            remove(&entry.path());
        }
    }
}
