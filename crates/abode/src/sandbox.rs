//! The sandbox flags of `abode server` and `abode provisioner start`, turned
//! into the isolation every Terraform run gets and the process supervisor
//! that starts workspace processes (`abode-sandbox`; docs/security.md).
//! Checked at start: a machine that cannot sandbox stops here with one line.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use abode_sandbox::{supervisor, Mount, Sandbox, Settings, User};
use abode_terraform::isolation::Isolation;
use anyhow::Context;

use crate::terraform_flags::{OnOff, TerraformFlags};

/// The user Terraform runs as when this process is root and no
/// `--terraform-user` is given: on every Debian machine, owns nothing.
pub const DEFAULT_USER: &str = "nobody";

/// Where one machine's builds keep what the sandbox needs.
pub struct Machine<'a> {
    pub data_dir: &'a Path,
    pub volumes_dir: &'a Path,
    pub process_logs_dir: &'a Path,
    pub provider_mirror: &'a Path,
    pub agent_binary: &'a Path,
    /// What Terraform runs get of this process's environment (its PATH
    /// finds Terraform).
    pub terraform_env: &'a [(String, String)],
    /// Files no sandbox may see (a TLS key, a provisioner key).
    pub secrets: &'a [&'a Path],
}

/// Refuses a data dir or secret under a directory every sandbox shows
/// read-only (`/usr`, `/opt`, ...): templates could read it there.
fn refuse_visible(machine: &Machine<'_>) -> anyhow::Result<()> {
    let private = std::iter::once(("the data dir", machine.data_dir)).chain(
        machine
            .secrets
            .iter()
            .map(|path| ("the secret file", *path)),
    );
    for (what, path) in private {
        let real = std::fs::canonicalize(path)
            .or_else(|_| std::path::absolute(path))
            .unwrap_or_else(|_| path.to_path_buf());
        if abode_sandbox::under_system_dirs(&real) {
            anyhow::bail!(
                "{what} {} is under a system directory every Terraform sandbox shows (/usr, /opt, ...), so templates could read it: keep it elsewhere (e.g. /var/lib/abode)",
                real.display()
            );
        }
    }
    Ok(())
}

/// The sandbox of this machine's Terraform runs and its process
/// supervisor's socket; `None` when the operator turned it off.
pub fn set_up(
    flags: &TerraformFlags,
    machine: &Machine<'_>,
) -> anyhow::Result<Option<(Arc<Isolation>, PathBuf)>> {
    if flags.terraform_sandbox == OnOff::Off {
        tracing::warn!(
            "--terraform-sandbox off: Terraform and workspace processes run as this process's user, with its files and /proc in reach; templates can read the data dir, the database and this process's environment"
        );
        return Ok(None);
    }
    refuse_visible(machine)?;
    let mounts = flags
        .terraform_mounts
        .iter()
        .filter(|mount| !mount.trim().is_empty())
        .map(|mount| mount.parse::<Mount>())
        .collect::<Result<Vec<_>, _>>()?;
    let root = nix::unistd::geteuid().is_root();
    let user = match (&flags.terraform_user, root) {
        (Some(name), true) => Some(User::by_name(name)?),
        (None, true) => Some(User::by_name(DEFAULT_USER).with_context(|| {
            format!("Terraform would run as {DEFAULT_USER}: pass --terraform-user USER")
        })?),
        (Some(name), false) => {
            let me = nix::unistd::User::from_uid(nix::unistd::geteuid())
                .ok()
                .flatten()
                .map(|user| user.name)
                .unwrap_or_default();
            if *name != me {
                anyhow::bail!(
                    "--terraform-user {name}: only a server running as root can run Terraform as another user (this one runs as {me})"
                );
            }
            None
        }
        (None, false) => None,
    };
    if user.as_ref().is_some_and(|user| user.uid == 0) {
        tracing::warn!(
            "--terraform-user root: Terraform and workspace processes run as root inside their sandboxes (capabilities dropped); what they can reach is only what the sandbox shows them"
        );
    }
    let sandbox = Sandbox::new(Settings {
        user: user.clone(),
        mounts,
    })?;
    for dir in [machine.volumes_dir, machine.process_logs_dir] {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // Terraform's provider creates and removes the volumes, as that user.
    sandbox.hand_over_one(machine.volumes_dir)?;
    let socket = machine.data_dir.join("supervisor.sock");
    supervisor::start(supervisor::SupervisorConfig {
        sandbox: sandbox.clone(),
        socket: socket.clone(),
        volumes_dir: machine.volumes_dir.to_path_buf(),
        logs_dir: machine.process_logs_dir.to_path_buf(),
        records_dir: machine.data_dir.join("supervised"),
        read_only: vec![machine.agent_binary.to_path_buf()],
        exec_helper: machine.agent_binary.to_path_buf(),
    })?;
    let path = machine
        .terraform_env
        .iter()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.as_str());
    let isolation = Isolation::new(
        sandbox,
        path,
        vec![machine.provider_mirror.to_path_buf()],
        // Not the supervisor's socket: each build is given one of its own,
        // in its work dir (`abode_contract::supervisor::open_build`).
        vec![machine.volumes_dir.to_path_buf()],
    )?;
    match &user {
        Some(user) => {
            tracing::info!(user = %user.name, uid = user.uid, "Terraform runs sandboxed (bubblewrap), as {}", user.name)
        }
        None => tracing::info!("Terraform runs sandboxed (bubblewrap), as this process's user"),
    }
    Ok(Some((Arc::new(isolation), socket)))
}
