//! Unsaved work in the workspace's home: Git repositories with changes that
//! exist nowhere else (issue 47). The server keeps the agent's last report
//! and holds a delete that would lose what it lists, so the scan must be
//! cheap, bounded and harmless: it walks at most [`Limits::depth`]
//! directories down, for at most [`Limits::time`], and looks at no more than
//! [`Limits::repositories`] repositories; it never follows a symbolic link;
//! and it asks real `git` with optional locks off (`GIT_OPTIONAL_LOCKS=0`:
//! a scan never writes the index), no pager, no prompt, no fsmonitor and no
//! hooks, each call killed at the scan's deadline.
//!
//! What counts as unsaved, per repository: uncommitted changes to tracked
//! files, untracked files that are not ignored (`git status --porcelain -z`),
//! commits on a branch no remote-tracking branch has (`git rev-list
//! --branches --not --remotes`), and a stash (`refs/stash`).

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use abode_sdk::requests::AgentUnsaved;
use abode_sdk::{UnsavedKind, UnsavedRepository};

/// How far a scan goes.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Directories below the home (a repository at `~/a/b/c/d` is found
    /// with depth 4).
    pub depth: usize,
    /// The whole scan's time, git's runs included.
    pub time: Duration,
    /// Repositories looked at.
    pub repositories: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            depth: 4,
            time: Duration::from_secs(2),
            repositories: 200,
        }
    }
}

/// Scans `home` for repositories with unsaved work.
pub fn scan(home: &Path, limits: Limits) -> AgentUnsaved {
    let deadline = Instant::now() + limits.time;
    let mut found = Vec::new();
    let truncated = find_repositories(home, limits, deadline, &mut found);
    let mut report = AgentUnsaved {
        repositories_scanned: 0,
        truncated,
        repositories: Vec::new(),
    };
    for repository in found {
        let Some(kinds) = unsaved_kinds(&repository, deadline) else {
            // Out of time (or git failed): what was not looked at may hold
            // work, so the report says it is incomplete.
            report.truncated = true;
            continue;
        };
        report.repositories_scanned += 1;
        if !kinds.is_empty() {
            let relative = repository.strip_prefix(home).unwrap_or(&repository);
            report.repositories.push(UnsavedRepository {
                path: display_path(relative.as_os_str()),
                kinds,
            });
        }
    }
    report
}

/// Repositories under `home`, breadth first, within the limits; true when a
/// limit cut the walk short.
fn find_repositories(
    home: &Path,
    limits: Limits,
    deadline: Instant,
    found: &mut Vec<PathBuf>,
) -> bool {
    let mut level = vec![home.to_path_buf()];
    for depth in 0..=limits.depth {
        let mut next = Vec::new();
        for dir in level {
            if Instant::now() >= deadline {
                return true;
            }
            if is_repository(&dir) {
                if found.len() >= limits.repositories {
                    return true;
                }
                found.push(dir.clone());
            }
            if depth == limits.depth {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if entry.file_name() == ".git" {
                    continue;
                }
                // `file_type` does not follow a link: a link to a directory
                // is not walked (it may lead out of the home, or round).
                if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                    next.push(entry.path());
                }
            }
        }
        next.sort();
        level = next;
    }
    false
}

/// A working tree's top: it has a `.git` directory or file (a worktree's or
/// a submodule's).
fn is_repository(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join(".git")).is_ok_and(|meta| !meta.file_type().is_symlink())
}

/// What unsaved work `repository` holds; `None` when git could not tell
/// (not run, failed, or out of time).
fn unsaved_kinds(repository: &Path, deadline: Instant) -> Option<Vec<UnsavedKind>> {
    let status = git(
        repository,
        &["status", "--porcelain=v1", "-z", "--untracked-files=normal"],
        deadline,
    )?;
    let mut kinds = status_kinds(&parse_status(&status)?);
    let unpushed = git(
        repository,
        &[
            "rev-list",
            "--max-count=1",
            "--branches",
            "--not",
            "--remotes",
        ],
        deadline,
    )?;
    if !unpushed.is_empty() {
        kinds.push(UnsavedKind::Unpushed);
    }
    // `refs/stash` exists while anything is stashed: `--quiet` prints it or
    // nothing, and exits 1 (not a failure here) without one.
    let stash = git_status_and_output(
        repository,
        &["rev-parse", "--verify", "--quiet", "refs/stash"],
        deadline,
    )?;
    if stash.0 == Some(0) && !stash.1.is_empty() {
        kinds.push(UnsavedKind::Stashed);
    }
    kinds.sort();
    kinds.dedup();
    Some(kinds)
}

/// Git's output, when it exits 0.
fn git(repository: &Path, args: &[&str], deadline: Instant) -> Option<Vec<u8>> {
    match git_status_and_output(repository, args, deadline)? {
        (Some(0), output) => Some(output),
        _ => None,
    }
}

/// Runs git in `repository` until `deadline`: its exit code and standard
/// output (`None` when it could not run or was killed at the deadline).
fn git_status_and_output(
    repository: &Path,
    args: &[&str],
    deadline: Instant,
) -> Option<(Option<i32>, Vec<u8>)> {
    let mut command = Command::new("git");
    command
        .arg("-C")
        .arg(repository)
        // No program of the repository's configuration runs, nothing is
        // written, nothing waits for a person.
        .args([
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.untrackedCache=false",
            "--no-pager",
        ])
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove(abode_contract::AGENT_TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = command.spawn().ok()?;
    let mut stdout = child.stdout.take()?;
    // Read on a thread (a big status must not fill the pipe), which says
    // when git closed its output: no polling, whose naps were most of a
    // scan's time.
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut output = Vec::new();
        let read = stdout.read_to_end(&mut output).map(|_| output);
        let _ = sender.send(read);
    });
    let left = deadline.saturating_duration_since(Instant::now());
    match receiver.recv_timeout(left) {
        Ok(Ok(output)) => {
            let status = child.wait().ok()?;
            Some((status.code(), output))
        }
        // Out of time, or the output unreadable.
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
    }
}

/// One entry of `git status --porcelain=v1 -z`: its two status letters and
/// its path (bytes, as git wrote them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StatusEntry {
    pub code: [u8; 2],
    pub path: Vec<u8>,
}

/// Parses `git status --porcelain=v1 -z`: entries `XY PATH` ended by NUL; a
/// rename or copy (`R` or `C` in either column) is followed by its source
/// path, also ended by NUL. With `-z` git writes paths as they are (spaces,
/// newlines and any byte but NUL), never quoted. `None` when the output is
/// not of that form.
pub(crate) fn parse_status(output: &[u8]) -> Option<Vec<StatusEntry>> {
    let mut entries = Vec::new();
    let mut fields = output.split(|byte| *byte == 0);
    while let Some(field) = fields.next() {
        if field.is_empty() {
            // The end (the output ends with NUL), or nothing at all.
            if fields.next().is_some() {
                return None;
            }
            break;
        }
        let [x, y, b' ', path @ ..] = field else {
            return None;
        };
        if path.is_empty() {
            return None;
        }
        if matches!(x, b'R' | b'C') || matches!(y, b'R' | b'C') {
            // The source path: part of this entry, not one of its own.
            fields.next().filter(|source| !source.is_empty())?;
        }
        entries.push(StatusEntry {
            code: [*x, *y],
            path: path.to_vec(),
        });
    }
    Some(entries)
}

/// The kinds of unsaved work status entries show (`!!`, ignored, is not
/// one: git prints it only when asked).
pub(crate) fn status_kinds(entries: &[StatusEntry]) -> Vec<UnsavedKind> {
    let mut kinds = Vec::new();
    if entries.iter().any(|entry| &entry.code == b"??") {
        kinds.push(UnsavedKind::Untracked);
    }
    if entries
        .iter()
        .any(|entry| &entry.code != b"??" && &entry.code != b"!!")
    {
        kinds.push(UnsavedKind::Uncommitted);
    }
    kinds
}

/// A path for people and JSON: UTF-8 as it is, with control characters and
/// bytes that are not UTF-8 written as `\xNN` (and `\` as `\\`), so that no
/// name can forge a line or another name.
pub(crate) fn display_path(path: &OsStr) -> String {
    let mut text = String::new();
    for chunk in path.as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                text.push_str("\\\\");
            } else if c.is_control() {
                let mut buffer = [0; 4];
                for byte in c.encode_utf8(&mut buffer).bytes() {
                    text.push_str(&format!("\\x{byte:02x}"));
                }
            } else {
                text.push(c);
            }
        }
        for byte in chunk.invalid() {
            text.push_str(&format!("\\x{byte:02x}"));
        }
    }
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    fn entry(code: &[u8; 2], path: &[u8]) -> StatusEntry {
        StatusEntry {
            code: *code,
            path: path.to_vec(),
        }
    }

    #[test]
    fn porcelain_z_is_read_with_hostile_names_as_written_by_hand() {
        // Written by hand from git-status(1)'s description of -z, not by
        // the code under test.
        let output: &[u8] = b" M a file with spaces\0?? line\nbreak\0A  \xff\xfe not utf-8\0R  new name\0old name\0?? -rf\0";
        assert_eq!(
            parse_status(output).unwrap(),
            vec![
                entry(b" M", b"a file with spaces"),
                entry(b"??", b"line\nbreak"),
                entry(b"A ", b"\xff\xfe not utf-8"),
                entry(b"R ", b"new name"),
                entry(b"??", b"-rf"),
            ]
        );
        assert_eq!(parse_status(b"").unwrap(), vec![]);
        // Not porcelain: no entry is made up from it.
        for bad in [
            &b"M\0"[..],
            b"?? \0",
            b"R  new\0",
            b"XY-path\0",
            b" M a\0\0 M b\0",
        ] {
            assert_eq!(parse_status(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn kinds_tell_untracked_from_uncommitted() {
        assert_eq!(status_kinds(&[]), vec![]);
        assert_eq!(
            status_kinds(&[entry(b"??", b"x")]),
            vec![UnsavedKind::Untracked]
        );
        assert_eq!(
            status_kinds(&[entry(b" D", b"x"), entry(b"??", b"y")]),
            vec![UnsavedKind::Untracked, UnsavedKind::Uncommitted]
        );
        assert_eq!(status_kinds(&[entry(b"!!", b"x")]), vec![]);
    }

    #[test]
    fn paths_are_shown_without_forging_lines() {
        let shown = |bytes: &[u8]| display_path(&OsString::from_vec(bytes.to_vec()));
        assert_eq!(shown(b"src/my app"), "src/my app");
        assert_eq!(shown(b"caf\xc3\xa9"), "café");
        assert_eq!(shown(b"a\nb"), "a\\x0ab");
        assert_eq!(shown(b"\xff\\x"), "\\xff\\\\x");
    }

    fn run(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    #[test]
    fn a_real_home_is_scanned_for_each_kind_with_hostile_names() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path();
        // A pushed, clean repository and its bare remote.
        run(home, &["init", "-q", "--bare", "remote.git"]);
        run(home, &["init", "-q", "clean"]);
        let clean = home.join("clean");
        std::fs::write(clean.join("README"), "hello").unwrap();
        run(&clean, &["add", "README"]);
        run(&clean, &["commit", "-q", "-m", "first"]);
        run(&clean, &["remote", "add", "origin", "../remote.git"]);
        run(&clean, &["push", "-q", "origin", "HEAD:refs/heads/main"]);
        run(&clean, &["fetch", "-q", "origin"]);
        std::fs::write(clean.join(".gitignore"), "ignored\n").unwrap();
        run(&clean, &["add", ".gitignore"]);
        run(&clean, &["commit", "-q", "-m", "ignore"]);
        run(&clean, &["push", "-q", "origin", "HEAD:refs/heads/main"]);
        run(&clean, &["fetch", "-q", "origin"]);
        std::fs::write(clean.join("ignored"), "not work").unwrap();
        // Untracked, with a name no line-based reading survives.
        let odd = home.join("deep/er/odd name\nhere");
        std::fs::create_dir_all(&odd).unwrap();
        run(&odd, &["init", "-q"]);
        std::fs::write(odd.join(OsStr::from_bytes(b"new \xff file")), "x").unwrap();
        // Unpushed and stashed.
        let local = home.join("local");
        std::fs::create_dir_all(&local).unwrap();
        run(&local, &["init", "-q"]);
        std::fs::write(local.join("f"), "1").unwrap();
        run(&local, &["add", "f"]);
        run(&local, &["commit", "-q", "-m", "one"]);
        std::fs::write(local.join("f"), "2").unwrap();
        run(&local, &["stash", "-q"]);
        // Too deep to be found.
        let deep = home.join("1/2/3/4/5");
        std::fs::create_dir_all(&deep).unwrap();
        run(&deep, &["init", "-q"]);
        std::fs::write(deep.join("x"), "x").unwrap();

        let report = scan(home, Limits::default());
        assert!(!report.truncated);
        assert_eq!(report.repositories_scanned, 3, "{report:?}");
        let mut found: Vec<(String, Vec<UnsavedKind>)> = report
            .repositories
            .into_iter()
            .map(|repository| (repository.path, repository.kinds))
            .collect();
        found.sort();
        assert_eq!(
            found,
            vec![
                (
                    "deep/er/odd name\\x0ahere".to_string(),
                    vec![UnsavedKind::Untracked]
                ),
                (
                    "local".to_string(),
                    vec![UnsavedKind::Unpushed, UnsavedKind::Stashed]
                ),
            ]
        );

        let few = scan(
            home,
            Limits {
                repositories: 1,
                ..Limits::default()
            },
        );
        assert!(few.truncated);
        assert_eq!(few.repositories_scanned, 1);
    }
}
