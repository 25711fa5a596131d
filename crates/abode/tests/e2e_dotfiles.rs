//! `abode dotfiles URL` (issue 48): a person's dotfiles from `file://`
//! repositories, as a shell in a workspace runs it (the agent puts `abode`
//! on its PATH): cloned, then pulled; the installer run; or, without one,
//! the dotfiles linked into HOME with what is already there kept.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use crate::util::{self, Run};

/// `abode ARGS` with `home` as HOME.
fn dotfiles(home: &Path, args: &[&str]) -> Run {
    let output = Command::new(util::abode_bin())
        .arg("dotfiles")
        .args(args)
        .env("HOME", home)
        .env_remove("ABODE_URL")
        .env_remove("ABODE_TOKEN")
        .output()
        .unwrap();
    Run::from_output(format!("abode dotfiles {}", args.join(" ")), output)
}

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Dot")
        .env("GIT_AUTHOR_EMAIL", "dot@example.com")
        .env("GIT_COMMITTER_NAME", "Dot")
        .env("GIT_COMMITTER_EMAIL", "dot@example.com")
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

/// A repository at `dir` holding `files` (name, content), committed.
fn repository(dir: &Path, files: &[(&str, &str)]) -> String {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    commit(dir, files, "dotfiles");
    format!("file://{}", dir.display())
}

fn commit(dir: &Path, files: &[(&str, &str)], message: &str) {
    for (name, content) in files {
        std::fs::write(dir.join(name), content).unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
}

#[test]
fn an_installer_runs_after_a_clone_and_again_after_a_pull() {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    // Not executable: run with sh. `setup` also there: install.sh comes first.
    let url = repository(
        &scratch.path().join("repo"),
        &[
            ("install.sh", "echo first >> \"$HOME/installed\"\n"),
            ("setup", "echo setup >> \"$HOME/installed\"\n"),
        ],
    );
    let first = dotfiles(&home, &[&url]).ok();
    assert!(first.stdout.contains("Cloning"), "{first}");
    assert_eq!(
        std::fs::read_to_string(home.join("installed")).unwrap(),
        "first\n"
    );
    assert!(home.join(".config/abode/dotfiles/.git").is_dir());

    commit(
        &scratch.path().join("repo"),
        &[("install.sh", "echo second >> \"$HOME/installed\"\n")],
        "second",
    );
    let again = dotfiles(&home, &[&url]).ok();
    assert!(again.stdout.contains("Pulling"), "{again}");
    assert_eq!(
        std::fs::read_to_string(home.join("installed")).unwrap(),
        "first\nsecond\n"
    );

    // Another repository into the same checkout: refused, nothing changed.
    let other = repository(&scratch.path().join("other"), &[(".vimrc", "set nu\n")]);
    dotfiles(&home, &[&other]).fails_with(1, &["holds the dotfiles of", "remove it"]);
    assert!(!home.join(".vimrc").exists());

    // A failing installer fails the command, with its name.
    let failing = repository(&scratch.path().join("failing"), &[("install", "exit 3\n")]);
    let elsewhere = scratch.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    dotfiles(&elsewhere, &[&failing]).fails_with(1, &["install failed"]);
}

#[test]
fn without_an_installer_dotfiles_are_linked_and_what_is_there_is_kept() {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".bashrc"), "mine\n").unwrap();
    let url = repository(
        &scratch.path().join("repo"),
        &[
            (".bashrc", "theirs\n"),
            (".vimrc", "set nu\n"),
            ("README.md", "not a dotfile\n"),
        ],
    );
    let linked = dotfiles(&home, &[&url, "--branch", "main"]).ok();
    assert!(linked.stdout.contains("Kept"), "{linked}");
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).unwrap(),
        "mine\n"
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".vimrc")).unwrap(),
        "set nu\n"
    );
    assert!(std::fs::symlink_metadata(home.join(".vimrc"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(!home.join("README.md").exists());
    assert!(!home.join(".git").exists());
    // Run again: nothing to link twice, and no error.
    let again = dotfiles(&home, &[&url, "--branch", "main"]).ok();
    assert!(!again.stdout.contains("Linked"), "{again}");
}

#[test]
fn bad_repositories_are_refused_in_one_line_and_leave_nothing() {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path();
    let missing = format!("file://{}/nowhere", scratch.path().display());
    let cases: [(&[&str], &str); 4] = [
        (&[""], "empty"),
        (&["--", "-uhoh"], "not a repository url"),
        (&[&missing], "could not clone"),
        (&[&missing, "--branch=-x"], "not a branch name"),
    ];
    for (args, needle) in cases {
        dotfiles(home, args).fails_with(1, &[needle]);
        assert!(
            !home.join(".config/abode/dotfiles").exists(),
            "{args:?} left a checkout"
        );
    }
}
