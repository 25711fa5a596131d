//! The boundary between the platform and the code it runs for templates.
//!
//! A template is code: its Terraform configuration, its providers, its
//! `local-exec`s and `external` data sources run with whatever the process
//! running Terraform can reach. Run as the server's user, that was the
//! platform itself (its database, its keys, `/proc/<server>/environ`). So
//! every Terraform run, and every long-lived workspace process, runs in a
//! bubblewrap (`bwrap`) sandbox of its own: new mount and PID namespaces, a
//! fresh `/proc`, a minimal `/dev`, a private `/tmp`, the system directories
//! read-only, a short list of `/etc` files, and only the paths its caller
//! names ([`View`]); when the server runs as root, as an unprivileged user
//! (dropped inside the sandbox with `setpriv`, after bwrap, as root, has
//! bound the paths the user itself could not reach). The network stays:
//! templates reach their clouds.
//!
//! [`supervisor`] starts, watches and stops workspace processes on behalf of
//! the provider, which cannot fork a process that outlives Terraform's PID
//! namespace.
//!
//! # How
//!
//! `Sandbox` finds bwrap (and setpriv) and checks at start that this machine
//! can make a sandbox: one line and a refusal otherwise (`--terraform-sandbox
//! off` is the only way past). It wraps a program in new mount, PID, IPC and
//! UTS namespaces with the system read-only, a short list of `/etc`, a private
//! `/tmp`, a fresh `/proc`, a minimal `/dev` and the paths of a `View`; as
//! `--terraform-user` when the server is root (bwrap binds as root, setpriv
//! drops inside, no capabilities, `no_new_privs`). `hand_over` gives a work dir
//! to that user.
//!
//! `supervisor.rs` is the process supervisor of the server (or daemon): a
//! private machine socket on which the runner opens, for each build, a
//! socket of the build's own in its work dir (given to the build as
//! `ABODE_PROCESS_SUPERVISOR`), on which the provider asks to start, check and
//! stop `abode_process`es (`abode_contract::supervisor`) for the build's
//! workspace. Each runs in a sandbox of its own (its volume, the agent binary),
//! is recorded by identity and workspace in `DATA_DIR/supervised`, and a stop
//! kills its PID namespace's first process, so nothing of it is left. The
//! supervisor answers only for processes it recorded, each to its own
//! workspace's builds: a template cannot have it signal anything else, and a
//! process's `dir` must lie in a volume of the machine's volumes dir.
//! `exec.rs` hands a process its environment on no command line: a sealed
//! memfd on standard input, read after the drop by `abode sandbox-exec`.
//!
//! `crates/abode/tests/e2e_sandbox.rs` holds both.

pub mod exec;
pub mod network;
pub mod supervisor;
pub mod uids;

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;

/// System directories bound read-only (or re-created as the links they are).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
];

/// What of `/etc` a sandbox sees: name resolution, certificate authorities,
/// users and groups (names, not password hashes), time zone, the dynamic
/// loader and Debian's alternatives. Nothing else: `/etc` is where
/// operators keep service environments and credentials.
const ETC_FILES: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/os-release",
    "/etc/mime.types",
];

/// Why a sandbox cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("bubblewrap (bwrap) is not installed: install Debian's bubblewrap, or pass --terraform-sandbox off (templates then run with this process's user and can read its data dir)")]
    NoBwrap,
    #[error(
        "setpriv (util-linux) is not installed: it drops to --terraform-user inside the sandbox"
    )]
    NoSetpriv,
    #[error("bubblewrap cannot make a sandbox on this machine ({0}): allow user namespaces (or run as root), or pass --terraform-sandbox off")]
    Unusable(String),
    #[error("--terraform-user {0}: no such user on this machine")]
    UnknownUser(String),
    #[error("--terraform-user {name}: {reason}")]
    BadUser { name: String, reason: String },
    #[error("--terraform-mount {0:?}: expected SRC[:DST][:ro] with absolute paths")]
    BadMount(String),
    #[error("--terraform-mount {path}: {reason}")]
    MountSource { path: String, reason: String },
    #[error("cannot give {path} to the sandbox's user: {reason}")]
    HandOver { path: String, reason: String },
    #[error(
        "environment variable name {0:?} is not a name (letters, digits and _, not first a digit)"
    )]
    EnvName(String),
    #[error("environment variable {0}'s value holds a NUL byte")]
    EnvValue(String),
    #[error("cannot hand the environment to the sandbox: {0}")]
    EnvHandOver(String),
}

/// A sandboxed program whose environment waits on standard input
/// ([`Sandbox::wrap_with_env`]).
#[derive(Debug)]
pub struct Wrapped {
    /// bwrap.
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Give it as the command's standard input (nothing else reads it).
    pub stdin: OwnedFd,
}

/// A variable name a shell would accept: nothing that could be taken for
/// an option or an assignment's end.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first == '_' || first.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// A path the operator adds to every Terraform sandbox (`--terraform-mount`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub source: PathBuf,
    pub destination: PathBuf,
    pub read_only: bool,
}

impl FromStr for Mount {
    type Err = SandboxError;

    /// `SRC`, `SRC:DST`, `SRC:ro` or `SRC:DST:ro`; both absolute.
    fn from_str(text: &str) -> Result<Mount, SandboxError> {
        let bad = || SandboxError::BadMount(text.chars().take(200).collect());
        let mut parts: Vec<&str> = text.split(':').collect();
        let read_only = parts.len() > 1 && parts.last() == Some(&"ro");
        if read_only {
            parts.pop();
        }
        let (source, destination) = match parts.as_slice() {
            [source] => (*source, *source),
            [source, destination] => (*source, *destination),
            _ => return Err(bad()),
        };
        let (source, destination) = (PathBuf::from(source), PathBuf::from(destination));
        let clean = |path: &Path| {
            path.is_absolute()
                && path
                    .components()
                    .all(|part| !matches!(part, std::path::Component::ParentDir))
        };
        if !clean(&source) || !clean(&destination) || destination == Path::new("/") {
            return Err(bad());
        }
        Ok(Mount {
            source,
            destination,
            read_only,
        })
    }
}

/// The unprivileged user a sandbox's processes run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl User {
    /// The user named `name` in this machine's user database.
    pub fn by_name(name: &str) -> Result<User, SandboxError> {
        match nix::unistd::User::from_name(name) {
            Ok(Some(user)) => Ok(User {
                name: user.name,
                uid: user.uid.as_raw(),
                gid: user.gid.as_raw(),
            }),
            Ok(None) => Err(SandboxError::UnknownUser(name.chars().take(64).collect())),
            Err(error) => Err(SandboxError::BadUser {
                name: name.chars().take(64).collect(),
                reason: error.to_string(),
            }),
        }
    }
}

/// How the sandboxes of this process are made.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Run sandboxed processes as this user. Only when this process is root
    /// and the user is not: otherwise they run as this process's user.
    pub user: Option<User>,
    /// Added to every Terraform sandbox.
    pub mounts: Vec<Mount>,
}

/// A working sandbox setup: bwrap found and checked, the user resolved.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: PathBuf,
    /// `setpriv` and the user it drops to, when one is dropped to.
    drop_to: Option<(PathBuf, User)>,
    /// True when sandboxed processes would run as root: capabilities are
    /// dropped then, so root in the sandbox cannot mount or make devices.
    as_root: bool,
    mounts: Vec<Mount>,
}

/// What one sandboxed process sees besides the system: its paths, where it
/// starts, and whether the operator's `--terraform-mount`s are added.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// Bound read-only at the same path.
    pub read_only: Vec<PathBuf>,
    /// Bound read-write at the same path.
    pub read_write: Vec<PathBuf>,
    /// Directories already open (`O_PATH`, inherited by bwrap), bound
    /// read-write at the path given: what bwrap binds is what was checked,
    /// whatever the name points to by then.
    pub read_write_fds: Vec<(std::os::fd::RawFd, PathBuf)>,
    /// The working directory inside.
    pub dir: PathBuf,
    /// Add the operator's `--terraform-mount`s (Terraform runs, not
    /// workspace processes).
    pub operator_mounts: bool,
    /// Run as this uid (and the group of the same number) instead of the
    /// sandbox's user: a workspace's own (`--workspace-uids`). Only when
    /// this process is root.
    pub run_as: Option<u32>,
    /// Files shown in place of the host's (`/etc/passwd` naming `run_as`):
    /// source, then the path inside.
    pub etc_files: Vec<(PathBuf, PathBuf)>,
}

impl Sandbox {
    /// Finds bwrap (and setpriv when a user is dropped to), checks the
    /// operator's mounts exist, and makes one sandbox to see that this
    /// machine allows it: any failure is one line saying what to do.
    pub fn new(settings: Settings) -> Result<Sandbox, SandboxError> {
        let bwrap = find_program("bwrap").ok_or(SandboxError::NoBwrap)?;
        let root = nix::unistd::geteuid().is_root();
        let drop_to = match settings.user {
            Some(user) if root && user.uid != 0 => Some((
                find_program("setpriv").ok_or(SandboxError::NoSetpriv)?,
                user,
            )),
            _ => None,
        };
        for mount in &settings.mounts {
            std::fs::metadata(&mount.source).map_err(|error| SandboxError::MountSource {
                path: mount.source.display().to_string(),
                reason: error.to_string(),
            })?;
        }
        let sandbox = Sandbox {
            bwrap,
            as_root: root && drop_to.is_none(),
            drop_to,
            mounts: settings.mounts,
        };
        sandbox.probe()?;
        Ok(sandbox)
    }

    /// The user sandboxed processes run as when it is not this process's.
    pub fn user(&self) -> Option<&User> {
        self.drop_to.as_ref().map(|(_, user)| user)
    }

    /// Runs `true` in a sandbox, as a build would run Terraform.
    fn probe(&self) -> Result<(), SandboxError> {
        let view = View {
            dir: PathBuf::from("/"),
            ..View::default()
        };
        let (program, args) = self.wrap(&view, Path::new("true"), &[]);
        let output = Command::new(program)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::null())
            .output()
            .map_err(|error| SandboxError::Unusable(error.to_string()))?;
        if output.status.success() {
            return Ok(());
        }
        let said = String::from_utf8_lossy(&output.stderr);
        let line = said
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty())
            .unwrap_or("it exited with an error")
            .chars()
            .take(200)
            .collect::<String>();
        Err(SandboxError::Unusable(line))
    }

    /// The program and arguments that run `program args` in a sandbox that
    /// sees `view`. The caller gives the environment (bwrap hands its own
    /// to the sandboxed process): clear it and pass exactly what it needs.
    pub fn wrap(&self, view: &View, program: &Path, args: &[OsString]) -> (PathBuf, Vec<OsString>) {
        let mut out: Vec<OsString> = Vec::new();
        let mut push = |items: &[&std::ffi::OsStr]| out.extend(items.iter().map(OsString::from));
        push(&[
            "--unshare-pid".as_ref(),
            "--unshare-ipc".as_ref(),
            "--unshare-uts".as_ref(),
            "--unshare-cgroup-try".as_ref(),
            "--proc".as_ref(),
            "/proc".as_ref(),
            "--dev".as_ref(),
            "/dev".as_ref(),
            "--perms".as_ref(),
            "1777".as_ref(),
            "--tmpfs".as_ref(),
            "/tmp".as_ref(),
        ]);
        for dir in SYSTEM_DIRS {
            let path = Path::new(dir);
            match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    if let Ok(target) = std::fs::read_link(path) {
                        push(&["--symlink".as_ref(), target.as_os_str(), path.as_os_str()]);
                    }
                }
                Ok(meta) if meta.is_dir() => {
                    push(&["--ro-bind".as_ref(), path.as_os_str(), path.as_os_str()])
                }
                _ => {}
            }
        }
        // Made by hand: bwrap would make it as private as a 0700 parent.
        push(&[
            "--perms".as_ref(),
            "0755".as_ref(),
            "--dir".as_ref(),
            "/etc".as_ref(),
        ]);
        for file in ETC_FILES {
            push(&["--ro-bind-try".as_ref(), file.as_ref(), file.as_ref()]);
        }
        // Bound after the host's: the later bind is the one seen.
        for (source, destination) in &view.etc_files {
            push(&[
                "--ro-bind".as_ref(),
                source.as_os_str(),
                destination.as_os_str(),
            ]);
        }
        // bwrap would make a bound path's missing parents as private as the
        // host's (a 0700 data dir): the user must be able to pass through them.
        let mut destinations: Vec<&Path> = view
            .read_only
            .iter()
            .chain(&view.read_write)
            .chain(view.read_write_fds.iter().map(|(_, path)| path))
            .map(PathBuf::as_path)
            .collect();
        if view.operator_mounts {
            destinations.extend(self.mounts.iter().map(|mount| mount.destination.as_path()));
        }
        let mut parents: Vec<&Path> = destinations
            .iter()
            .flat_map(|path| path.ancestors().skip(1))
            .filter(|dir| {
                *dir != Path::new("/") && *dir != Path::new("/tmp") && !under_system_dirs(dir)
            })
            .collect();
        // Component-wise order: a parent comes before what is in it.
        parents.sort();
        parents.dedup();
        for dir in parents {
            push(&[
                "--perms".as_ref(),
                "0755".as_ref(),
                "--dir".as_ref(),
                dir.as_os_str(),
            ]);
        }
        for path in &view.read_only {
            push(&["--ro-bind".as_ref(), path.as_os_str(), path.as_os_str()]);
        }
        for path in &view.read_write {
            push(&["--bind".as_ref(), path.as_os_str(), path.as_os_str()]);
        }
        for (fd, path) in &view.read_write_fds {
            let fd = fd.to_string();
            push(&["--bind-fd".as_ref(), fd.as_ref(), path.as_os_str()]);
        }
        if view.operator_mounts {
            for mount in &self.mounts {
                let kind = if mount.read_only {
                    "--ro-bind"
                } else {
                    "--bind"
                };
                push(&[
                    kind.as_ref(),
                    mount.source.as_os_str(),
                    mount.destination.as_os_str(),
                ]);
            }
        }
        push(&["--chdir".as_ref(), view.dir.as_os_str()]);
        if self.as_root {
            push(&["--cap-drop".as_ref(), "ALL".as_ref()]);
        }
        push(&["--".as_ref()]);
        let drop_to = match (&self.drop_to, view.run_as) {
            (Some((setpriv, _)), Some(uid)) => Some((setpriv, uid, uid)),
            (Some((setpriv, user)), None) => Some((setpriv, user.uid, user.gid)),
            (None, _) => None,
        };
        if let Some((setpriv, uid, gid)) = drop_to {
            let (uid, gid) = (format!("--reuid={uid}"), format!("--regid={gid}"));
            push(&[
                setpriv.as_os_str(),
                uid.as_ref(),
                gid.as_ref(),
                "--clear-groups".as_ref(),
                "--inh-caps=-all".as_ref(),
                "--bounding-set=-all".as_ref(),
                "--no-new-privs".as_ref(),
                "--".as_ref(),
            ]);
        }
        push(&[program.as_os_str()]);
        out.extend(args.iter().cloned());
        (self.bwrap.clone(), out)
    }

    /// Gives `path` and everything under it (links themselves, never what
    /// they point to) to the sandbox's user, so that it can write there.
    /// Nothing when sandboxed processes run as this process's user.
    pub fn hand_over(&self, path: &Path) -> Result<(), SandboxError> {
        let Some((_, user)) = &self.drop_to else {
            return Ok(());
        };
        hand_over_tree(path, user)
    }

    /// [`Sandbox::hand_over`] of `path` alone.
    pub fn hand_over_one(&self, path: &Path) -> Result<(), SandboxError> {
        let Some((_, user)) = &self.drop_to else {
            return Ok(());
        };
        chown_one(path, user)
    }
}

fn chown_one(path: &Path, user: &User) -> Result<(), SandboxError> {
    let meta = std::fs::symlink_metadata(path).map_err(|error| SandboxError::HandOver {
        path: path.display().to_string(),
        reason: error.to_string(),
    })?;
    if meta.uid() == user.uid && meta.gid() == user.gid {
        return Ok(());
    }
    std::os::unix::fs::lchown(path, Some(user.uid), Some(user.gid)).map_err(|error| {
        SandboxError::HandOver {
            path: path.display().to_string(),
            reason: error.to_string(),
        }
    })
}

fn hand_over_tree(path: &Path, user: &User) -> Result<(), SandboxError> {
    chown_one(path, user)?;
    let is_dir = std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir());
    if !is_dir {
        return Ok(());
    }
    let entries = std::fs::read_dir(path).map_err(|error| SandboxError::HandOver {
        path: path.display().to_string(),
        reason: error.to_string(),
    })?;
    for entry in entries.flatten() {
        hand_over_tree(&entry.path(), user)?;
    }
    Ok(())
}

/// `name` on this process's PATH (then /usr/bin), as an absolute path.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/bin")])
        .map(|dir| dir.join(name))
        .find(|candidate| {
            candidate.is_absolute()
                && std::fs::metadata(candidate)
                    .is_ok_and(|meta| meta.is_file() && meta.mode() & 0o111 != 0)
        })
}

/// Whether `path` is visible in every sandbox anyway (under a system dir).
pub fn under_system_dirs(path: &Path) -> bool {
    SYSTEM_DIRS.iter().any(|dir| {
        let dir = Path::new(dir);
        // A linked dir (/bin -> usr/bin) shows what /usr shows.
        path.starts_with(dir) && std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.is_dir())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn mounts_read_source_destination_and_read_only() {
        assert_eq!(
            "/srv/a".parse::<Mount>().unwrap(),
            Mount {
                source: "/srv/a".into(),
                destination: "/srv/a".into(),
                read_only: false
            }
        );
        assert_eq!(
            "/srv/a:/data:ro".parse::<Mount>().unwrap(),
            Mount {
                source: "/srv/a".into(),
                destination: "/data".into(),
                read_only: true
            }
        );
        assert!("/srv/a:ro".parse::<Mount>().unwrap().read_only);
        for bad in ["a", "/a:b", "/a:/b:/c", "/a/../b", "/a:/", ""] {
            assert!(bad.parse::<Mount>().is_err(), "{bad}");
        }
    }

    #[test]
    fn an_unknown_user_is_refused_by_name() {
        let error = User::by_name("no-such-user-abode").unwrap_err();
        assert!(error.to_string().contains("no such user"), "{error}");
        assert_eq!(User::by_name("root").unwrap().uid, 0);
    }
}
