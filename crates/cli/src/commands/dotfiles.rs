//! `abode dotfiles URL [--branch B]`: a person's dotfiles in the workspace
//! (docs/cli.md). Cloned to `~/.config/abode/dotfiles` (pulled when run
//! again), then the repository's own installer runs, by the names
//! Codespaces and Coder look for; a repository without one has its
//! dotfiles linked into `HOME`. A file already in `HOME` is never
//! replaced: it is named and left as it is.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use clap::Args;

use super::EXIT_OK;

/// The installers looked for, in order: the first that exists runs.
const INSTALLERS: [&str; 6] = [
    "install.sh",
    "install",
    "bootstrap.sh",
    "bootstrap",
    "setup.sh",
    "setup",
];

/// Where the repository goes, under `HOME`.
const CHECKOUT: &str = ".config/abode/dotfiles";

#[derive(Debug, Args)]
pub struct DotfilesArgs {
    /// The repository (`https://...`, `git@host:path`, `ssh://...`, `file://...`).
    pub url: String,
    /// A branch other than the repository's default.
    #[arg(long)]
    pub branch: Option<String>,
}

pub fn run(args: DotfilesArgs) -> anyhow::Result<u8> {
    check_url(&args.url)?;
    if let Some(branch) = &args.branch {
        if branch.is_empty() || branch.starts_with('-') {
            bail!("--branch {branch:?} is not a branch name");
        }
    }
    let home = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set: dotfiles go into the home directory")?;
    let checkout = home.join(CHECKOUT);
    if checkout.join(".git").exists() {
        update(&checkout, &args)?;
    } else if checkout.exists() {
        bail!(
            "{} is there and is not a Git checkout: move it away to install dotfiles",
            checkout.display()
        );
    } else {
        clone(&checkout, &args)?;
    }
    match INSTALLERS
        .iter()
        .map(|name| checkout.join(name))
        .find(|path| path.is_file())
    {
        Some(installer) => install(&installer, &checkout, &home),
        None => link(&checkout, &home),
    }
}

/// Refuses what Git would read as an option, and empty input.
fn check_url(url: &str) -> anyhow::Result<()> {
    if url.trim().is_empty() {
        bail!("the dotfiles URL is empty");
    }
    if url.starts_with('-') {
        bail!("{url:?} is not a repository URL");
    }
    Ok(())
}

fn git() -> Command {
    let mut git = Command::new("git");
    // Never wait for a password nobody will type.
    git.env("GIT_TERMINAL_PROMPT", "0");
    git
}

/// Runs `command`, its output passed through; fails with `what` when it does.
fn run_git(mut command: Command, what: &str) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("cannot run git to {what}: is git installed?"))?;
    if !status.success() {
        bail!("git could not {what} ({status})");
    }
    Ok(())
}

fn clone(checkout: &Path, args: &DotfilesArgs) -> anyhow::Result<()> {
    if let Some(parent) = checkout.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    println!("Cloning {} into {}", args.url, checkout.display());
    let mut command = git();
    command.arg("clone");
    if let Some(branch) = &args.branch {
        command.args(["--branch", branch]);
    }
    command.arg("--").arg(&args.url).arg(checkout);
    let cloned = run_git(command, &format!("clone {}", args.url));
    if cloned.is_err() {
        // Half a clone would be taken for dotfiles the next time.
        let _ = std::fs::remove_dir_all(checkout);
    }
    cloned
}

/// A checkout from an earlier run: the same repository, pulled (a branch
/// asked for is checked out first).
fn update(checkout: &Path, args: &DotfilesArgs) -> anyhow::Result<()> {
    let origin = git()
        .arg("-C")
        .arg(checkout)
        .args(["remote", "get-url", "origin"])
        .output()
        .context("cannot run git: is git installed?")?;
    let origin = String::from_utf8_lossy(&origin.stdout).trim().to_string();
    if origin != args.url {
        bail!(
            "{} holds the dotfiles of {origin}, not {}: remove it to change repositories",
            checkout.display(),
            args.url
        );
    }
    println!("Pulling {} in {}", args.url, checkout.display());
    if let Some(branch) = &args.branch {
        let mut fetch = git();
        fetch
            .arg("-C")
            .arg(checkout)
            .args(["fetch", "origin", branch]);
        run_git(fetch, &format!("fetch branch {branch}"))?;
        let mut switch = git();
        switch.arg("-C").arg(checkout).args(["checkout", branch]);
        run_git(switch, &format!("check out branch {branch}"))?;
    }
    let mut pull = git();
    pull.arg("-C").arg(checkout).args(["pull", "--ff-only"]);
    run_git(pull, "pull (only a fast-forward is taken)")
}

/// Runs the repository's installer in its checkout: directly when it is
/// executable, with `sh` when not.
fn install(installer: &Path, checkout: &Path, home: &Path) -> anyhow::Result<u8> {
    let executable = std::fs::metadata(installer)
        .map(|meta| meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false);
    let name = installer
        .file_name()
        .unwrap_or(OsStr::new("installer"))
        .to_string_lossy()
        .to_string();
    println!("Running {name}");
    let mut command = if executable {
        Command::new(installer)
    } else {
        let mut sh = Command::new("sh");
        sh.arg(installer);
        sh
    };
    let status = command
        .current_dir(checkout)
        .env("HOME", home)
        .status()
        .with_context(|| format!("cannot run {}", installer.display()))?;
    if !status.success() {
        bail!("the dotfiles' {name} failed ({status})");
    }
    Ok(EXIT_OK)
}

/// Links each dotfile at the checkout's top (a name starting with `.`, but
/// Git's own) into `HOME`. What is already there stays, and is named.
fn link(checkout: &Path, home: &Path) -> anyhow::Result<u8> {
    let entries = std::fs::read_dir(checkout)
        .with_context(|| format!("cannot read {}", checkout.display()))?;
    let mut names: Vec<std::ffi::OsString> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.file_name()))
        .filter(|name| {
            let text = name.to_string_lossy();
            text.starts_with('.') && !matches!(text.as_ref(), ".git" | ".github" | ".gitmodules")
        })
        .collect();
    names.sort();
    if names.is_empty() {
        println!("No installer and no dotfiles in the repository: nothing to do.");
        return Ok(EXIT_OK);
    }
    let mut kept = 0;
    for name in names {
        let source = checkout.join(&name);
        let target = home.join(&name);
        match std::fs::read_link(&target) {
            Ok(points_to) if points_to == source => continue,
            _ if target.symlink_metadata().is_ok() => {
                println!(
                    "Kept {}: it is already there (move it away and run again to link the dotfile)",
                    target.display()
                );
                kept += 1;
            }
            _ => {
                std::os::unix::fs::symlink(&source, &target)
                    .with_context(|| format!("cannot link {}", target.display()))?;
                println!("Linked {} -> {}", target.display(), source.display());
            }
        }
    }
    if kept > 0 {
        println!("{kept} file(s) in {} kept as they were.", home.display());
    }
    Ok(EXIT_OK)
}
