//! How a workspace process gets its environment without it ever being on a
//! command line.
//!
//! `/proc/<pid>/cmdline` is readable by every user of the machine, so no
//! variable of a template's (an agent token) may be an argument of any
//! process, not even for a moment. And `bwrap` and `setpriv` run
//! privileged, so none of those variables may be in their environment
//! either (an `LD_PRELOAD` there would run template code as root). So the
//! supervisor writes the variables, `NAME=VALUE` each ended by a NUL, into a
//! sealed memfd and gives it to `bwrap` as standard input; `bwrap` and
//! `setpriv` leave standard input alone, and inside the sandbox, after the
//! drop to the unprivileged user, `abode sandbox-exec -- PROGRAM ARGS...`
//! (this module's [`run`], a hidden command of the `abode` binary, which
//! every workspace process's sandbox shows read-only) reads them, puts
//! `/dev/null` in standard input's place and `execve`s the program with
//! exactly those variables, found on their `PATH` as `env` would.

use std::ffi::{CString, OsString};
use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;

use crate::SandboxError;

/// The hidden command of the `abode` binary that runs [`run`].
pub const COMMAND: &str = "sandbox-exec";

/// The most environment [`run`] reads (the supervisor's requests are
/// smaller than this).
const MAX_ENV: u64 = 4 * 1024 * 1024;

/// Where a program without a `/` is looked for when the environment has no
/// `PATH` (glibc's, as `env` would).
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";

/// The variables as [`run`] reads them, in a sealed memfd read from its
/// start: give it to the sandbox as standard input.
/// A name given twice keeps its first place and its last value, as `env`
/// (which sets each in turn) left it.
pub(crate) fn env_fd(env: &[(String, String)]) -> Result<OwnedFd, SandboxError> {
    let mut unique: Vec<(&str, &str)> = Vec::with_capacity(env.len());
    for (name, value) in env {
        if !crate::is_env_name(name) {
            return Err(SandboxError::EnvName(name.clone()));
        }
        if value.contains('\0') {
            return Err(SandboxError::EnvValue(name.clone()));
        }
        match unique.iter_mut().find(|(seen, _)| *seen == name) {
            Some(kept) => kept.1 = value,
            None => unique.push((name, value)),
        }
    }
    let mut text = Vec::new();
    for (name, value) in unique {
        text.extend_from_slice(name.as_bytes());
        text.push(b'=');
        text.extend_from_slice(value.as_bytes());
        text.push(0);
    }
    let failed = |error: &dyn std::fmt::Display| SandboxError::EnvHandOver(error.to_string());
    use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
    let fd = memfd_create(
        c"abode-env",
        MemFdCreateFlag::MFD_CLOEXEC | MemFdCreateFlag::MFD_ALLOW_SEALING,
    )
    .map_err(|error| failed(&error))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&text).map_err(|error| failed(&error))?;
    use nix::fcntl::{fcntl, FcntlArg, SealFlag};
    fcntl(
        file.as_raw_fd(),
        FcntlArg::F_ADD_SEALS(
            SealFlag::F_SEAL_WRITE
                | SealFlag::F_SEAL_GROW
                | SealFlag::F_SEAL_SHRINK
                | SealFlag::F_SEAL_SEAL,
        ),
    )
    .map_err(|error| failed(&error))?;
    file.rewind().map_err(|error| failed(&error))?;
    Ok(OwnedFd::from(file))
}

impl crate::Sandbox {
    /// [`Sandbox::wrap`] for a program whose environment comes from the
    /// caller (a template), which is on no command line at any moment
    /// (`/proc/<pid>/cmdline` is every user's to read) and in no privileged
    /// process's environment: `bwrap` and `setpriv` (which run with
    /// privileges outside and inside) never see it, since an `LD_PRELOAD`
    /// there would be code run as root. The variables (names only) wait in
    /// a sealed memfd, the command's standard input, which `helper` (the
    /// `abode` binary, visible in `view`) reads inside the sandbox after the
    /// drop to the unprivileged user, before it `execve`s `program` with
    /// exactly them ([`run`]). Start the returned command with a cleared
    /// environment.
    pub fn wrap_with_env(
        &self,
        view: &crate::View,
        helper: &Path,
        program: &Path,
        args: &[OsString],
        env: &[(String, String)],
    ) -> Result<crate::Wrapped, SandboxError> {
        let stdin = env_fd(env)?;
        let mut helper_args: Vec<OsString> = vec![COMMAND.into(), "--".into()];
        helper_args.push(program.as_os_str().to_owned());
        helper_args.extend(args.iter().cloned());
        let (program, args) = self.wrap(view, helper, &helper_args);
        Ok(crate::Wrapped {
            program,
            args,
            stdin,
        })
    }
}

/// Why [`run`] could not start the program.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("usage: abode {COMMAND} -- PROGRAM [ARGS...] (the environment on standard input)")]
    Usage,
    #[error("cannot read the environment from standard input: {0}")]
    Read(String),
    #[error("the environment on standard input is larger than {MAX_ENV} bytes")]
    TooLarge,
    #[error("the environment on standard input holds {0:?}, which is not NAME=VALUE")]
    NotAVariable(String),
    #[error("cannot put /dev/null in place of standard input: {0}")]
    Stdin(String),
    #[error("{0:?} holds a NUL byte")]
    Nul(String),
    #[error("cannot run {program:?}: {reason}")]
    Exec { program: String, reason: Errno },
}

impl ExecError {
    /// `env`'s exit statuses: 127 for a program not found, 126 for one
    /// that cannot run, 125 when the helper itself failed.
    pub fn exit_status(&self) -> u8 {
        match self {
            ExecError::Exec {
                reason: Errno::ENOENT | Errno::ENOTDIR,
                ..
            } => 127,
            ExecError::Exec { .. } => 126,
            _ => 125,
        }
    }
}

/// `abode sandbox-exec -- PROGRAM ARGS...` (`args` after the command's
/// name): the environment from standard input, `/dev/null` in its place,
/// then `PROGRAM` with exactly that environment. Returns only on failure.
pub fn run(args: &[OsString]) -> ExecError {
    match exec(args) {
        Ok(never) => match never {},
        Err(error) => error,
    }
}

fn exec(args: &[OsString]) -> Result<std::convert::Infallible, ExecError> {
    let command = match args.split_first() {
        Some((dashes, command)) if dashes == "--" && !command.is_empty() => command,
        _ => return Err(ExecError::Usage),
    };
    let mut text = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_ENV + 1)
        .read_to_end(&mut text)
        .map_err(|error| ExecError::Read(error.to_string()))?;
    if text.len() as u64 > MAX_ENV {
        return Err(ExecError::TooLarge);
    }
    let env = parse_env(&text)?;
    // The descriptor goes: the program gets what every process had before.
    let null =
        std::fs::File::open("/dev/null").map_err(|error| ExecError::Stdin(error.to_string()))?;
    nix::unistd::dup2(null.as_raw_fd(), 0).map_err(|error| ExecError::Stdin(error.to_string()))?;
    drop(null);
    let c_string = |arg: &OsString| {
        CString::new(arg.as_bytes()).map_err(|_| ExecError::Nul(arg.to_string_lossy().into()))
    };
    let argv = command
        .iter()
        .map(c_string)
        .collect::<Result<Vec<_>, _>>()?;
    let program = &command[0];
    let fail = |reason| ExecError::Exec {
        program: program.to_string_lossy().into(),
        reason,
    };
    let candidates = candidates(program.as_bytes(), &env);
    let mut error = Errno::ENOENT;
    for candidate in candidates {
        let path = CString::new(candidate).map_err(|_| fail(Errno::EINVAL))?;
        let reason = match nix::unistd::execve(&path, &argv, &env) {
            Ok(never) => match never {},
            Err(reason) => reason,
        };
        match reason {
            // A file without `#!`: the shell runs it, as execvp would.
            Errno::ENOEXEC => {
                let mut shell_argv = vec![c"/bin/sh".to_owned(), path.clone()];
                shell_argv.extend(argv.iter().skip(1).cloned());
                let reason = match nix::unistd::execve(c"/bin/sh", &shell_argv, &env) {
                    Ok(never) => match never {},
                    Err(reason) => reason,
                };
                return Err(fail(reason));
            }
            // Not here: the next directory of PATH.
            Errno::ENOENT | Errno::ENOTDIR => {}
            // Found but not runnable: told unless found runnable later.
            Errno::EACCES => error = Errno::EACCES,
            other => return Err(fail(other)),
        }
    }
    Err(fail(error))
}

/// The NUL-ended `NAME=VALUE`s of `text`.
fn parse_env(text: &[u8]) -> Result<Vec<CString>, ExecError> {
    let mut env = Vec::new();
    for pair in text.split(|byte| *byte == 0) {
        if pair.is_empty() {
            continue;
        }
        let name_end = pair.iter().position(|byte| *byte == b'=');
        let named = name_end
            .is_some_and(|end| std::str::from_utf8(&pair[..end]).is_ok_and(crate::is_env_name));
        if !named {
            return Err(ExecError::NotAVariable(
                String::from_utf8_lossy(pair).chars().take(64).collect(),
            ));
        }
        // Split on NULs: none is left inside.
        env.push(CString::new(pair).map_err(|_| ExecError::Nul("environment".into()))?);
    }
    Ok(env)
}

/// Where `program` is tried, in order: itself when it names a path, else
/// each directory of the environment's `PATH` (an empty one is the working
/// directory), as `execvp` does.
fn candidates(program: &[u8], env: &[CString]) -> Vec<Vec<u8>> {
    if program.contains(&b'/') {
        return vec![program.to_vec()];
    }
    let path = env
        .iter()
        .rev()
        .find_map(|pair| pair.as_bytes().strip_prefix(b"PATH="))
        .unwrap_or(DEFAULT_PATH);
    path.split(|byte| *byte == b':')
        .map(|dir| {
            if dir.is_empty() {
                program.to_vec()
            } else {
                let mut full = dir.to_vec();
                if !full.ends_with(b"/") {
                    full.push(b'/');
                }
                full.extend_from_slice(program);
                full
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A template's variables reach the program only, set after the drop:
    /// never `bwrap`'s or `setpriv`'s own environment, never an argument of
    /// any process, and only by name.
    #[test]
    fn a_programs_environment_is_set_after_the_drop_and_only_by_name() {
        let sandbox = crate::Sandbox {
            bwrap: "/usr/bin/bwrap".into(),
            drop_to: Some((
                "/usr/bin/setpriv".into(),
                crate::User {
                    name: "nobody".into(),
                    uid: 65534,
                    gid: 65534,
                },
            )),
            as_root: false,
            mounts: Vec::new(),
        };
        let view = crate::View {
            dir: "/srv/volumes/home".into(),
            ..crate::View::default()
        };
        let env = [
            (
                "LD_PRELOAD".to_string(),
                "/srv/volumes/x/evil.so".to_string(),
            ),
            ("ABODE_AGENT_TOKEN".to_string(), "secret-token".to_string()),
        ];
        let helper = std::path::Path::new("/opt/abode/abode");
        let wrapped = sandbox
            .wrap_with_env(
                &view,
                helper,
                std::path::Path::new("/bin/agent"),
                &["run".into()],
                &env,
            )
            .unwrap();
        assert_eq!(wrapped.program, std::path::Path::new("/usr/bin/bwrap"));
        let args: Vec<&str> = wrapped
            .args
            .iter()
            .map(|arg| arg.to_str().unwrap())
            .collect();
        for arg in &args {
            assert!(
                !arg.contains("evil.so") && !arg.contains("secret-token"),
                "a value on the command line: {args:?}"
            );
        }
        let drop = args
            .iter()
            .position(|arg| *arg == "/usr/bin/setpriv")
            .unwrap();
        let tail = &args[drop..];
        let helper_at = tail
            .iter()
            .position(|arg| *arg == "/opt/abode/abode")
            .unwrap();
        assert_eq!(
            &tail[helper_at..],
            ["/opt/abode/abode", COMMAND, "--", "/bin/agent", "run"]
        );
        assert!(tail[..helper_at].contains(&"--no-new-privs"), "{tail:?}");
        let mut handed = Vec::new();
        std::fs::File::from(wrapped.stdin)
            .read_to_end(&mut handed)
            .unwrap();
        assert_eq!(
            handed,
            b"LD_PRELOAD=/srv/volumes/x/evil.so\0ABODE_AGENT_TOKEN=secret-token\0"
        );
        for bad in ["", "-u", "A=B", "1A", "A B", "--"] {
            let env = [(bad.to_string(), "x".to_string())];
            assert!(
                matches!(
                    sandbox.wrap_with_env(
                        &view,
                        helper,
                        std::path::Path::new("/bin/agent"),
                        &[],
                        &env
                    ),
                    Err(SandboxError::EnvName(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn variables_are_read_back_exactly_and_only_as_names() {
        let env = [
            ("A".to_string(), "1 2\n3=4".to_string()),
            ("HOME".to_string(), "/tmp".to_string()),
            ("EMPTY".to_string(), String::new()),
            ("HOME".to_string(), "/srv/home".to_string()),
        ];
        let fd = env_fd(&env).unwrap();
        let mut text = Vec::new();
        std::fs::File::from(fd).read_to_end(&mut text).unwrap();
        assert_eq!(text, b"A=1 2\n3=4\0HOME=/srv/home\0EMPTY=\0");
        let text: &[u8] = b"A=1 2\n3=4\0EMPTY=\0";
        let parsed = parse_env(text).unwrap();
        assert_eq!(parsed, [c"A=1 2\n3=4".to_owned(), c"EMPTY=".to_owned()]);
        for bad in [&b"=x\0"[..], b"A B=x\0", b"novalue\0", b"-u=x\0"] {
            assert!(parse_env(bad).is_err(), "{bad:?}");
        }
        assert!(matches!(
            env_fd(&[("A".into(), "a\0b".into())]),
            Err(SandboxError::EnvValue(_))
        ));
    }

    #[test]
    fn a_program_is_found_on_its_own_path() {
        let env = [c"PATH=/a::/b/".to_owned()];
        assert_eq!(
            candidates(b"sh", &env),
            [b"/a/sh".to_vec(), b"sh".to_vec(), b"/b/sh".to_vec()]
        );
        assert_eq!(candidates(b"./x", &env), [b"./x".to_vec()]);
        assert_eq!(
            candidates(b"sh", &[]),
            [b"/bin/sh".to_vec(), b"/usr/bin/sh".to_vec()]
        );
    }
}
