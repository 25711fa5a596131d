//! The process supervisor: starts workspace processes (`abode_process`) in
//! sandboxes of their own when the provider asks, and answers for them
//! later (are they running, stop them).
//!
//! The provider runs inside Terraform's sandbox, whose PID namespace dies
//! with Terraform: a process it forked would die at the end of the apply,
//! and it could see no process of an earlier build. The supervisor runs in
//! the server (or daemon), listens on a private unix socket that only the
//! sandboxes are given (`ABODE_PROCESS_SUPERVISOR`), and starts each process
//! with bwrap: its volume as its home and only writable place, the system
//! read-only, its own PID namespace, the sandbox's unprivileged user. A
//! process is not a child anyone waits for once the server is gone: it
//! outlives a restart of the server like any workspace, and is found again
//! by its record (its pid and start time) under the supervisor's records
//! directory. Only recorded processes are answered for or stopped, so a
//! template cannot have the supervisor signal anything else.
//!
//! Every request is a workspace's. The machine's socket (private to this
//! process's user, in the data dir, shown to no sandbox) takes only the
//! runner's [`Request::Open`]: it names a build's workspace and a path in the
//! build's work dir, where the supervisor listens for that build until the
//! runner's connection closes. What a build asks on its own socket is asked
//! for its workspace: a process it starts is recorded as the workspace's, and
//! a process recorded as another workspace's is answered for as one that does
//! not exist (not running; stopped), so a template can neither stop another
//! workspace's process nor learn that an id it guessed is one.

use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use abode_contract::supervisor::{Reply, Request, MAX_LINE};
use abode_procfs::Identity;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

use crate::network::Networks;
use crate::{Sandbox, View};

/// How long after its start a process that exited with an error fails the
/// create (a typo, a missing file) rather than showing as drift later.
const STARTUP_CHECK: Duration = Duration::from_millis(200);
const POLL: Duration = Duration::from_millis(50);
/// The only variable `bwrap` and `setpriv` get.
const SAFE_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";
/// Held while a workspace process's sandbox is spawned (see `start_process`).
static SPAWNING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Where the supervisor keeps things and what its processes may see.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    pub sandbox: Sandbox,
    /// The machine's socket, on which the runner opens each build's own
    /// ([`Request::Open`]); no sandbox is given it.
    pub socket: PathBuf,
    /// A process's `dir` must lie in a volume under this directory.
    pub volumes_dir: PathBuf,
    /// Where each process's output goes (one file per process).
    pub logs_dir: PathBuf,
    /// One record per running process, by identity (private to the server).
    pub records_dir: PathBuf,
    /// Bound read-only into every process's sandbox (the agent's binary).
    pub read_only: Vec<PathBuf>,
    /// The `abode` binary: bound read-only too, it sets each process's
    /// environment after the drop (`abode sandbox-exec`, [`crate::exec`]).
    pub exec_helper: PathBuf,
    /// Each workspace's own network (`--workspace-network isolated`);
    /// `None`: the host's, shared.
    pub networks: Option<std::sync::Arc<Networks>>,
}

/// Who a build's socket asks for: its workspace, and what of the host that
/// workspace's network reaches (the access URL's loopback address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildScope {
    pub workspace_id: String,
    pub forward: Option<std::net::SocketAddr>,
    /// The workspace's own uid (`--workspace-uids`).
    pub uid: Option<u32>,
}

impl BuildScope {
    /// A build of `workspace_id` whose agent dials `agent_url`.
    pub fn new(workspace_id: &str, agent_url: Option<&str>) -> BuildScope {
        BuildScope {
            workspace_id: workspace_id.to_string(),
            forward: agent_url.and_then(crate::network::loopback_of),
            uid: None,
        }
    }
}

/// Why the supervisor could not start listening.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorStartError {
    #[error("cannot listen on the process supervisor's socket {path}: {reason}")]
    Listen { path: String, reason: String },
    #[error(transparent)]
    Sandbox(#[from] crate::SandboxError),
}

/// Starts listening on the config's socket (made anew, 0600, this
/// process's user's) and serves each connection on a thread of its own.
pub fn start(config: SupervisorConfig) -> Result<(), SupervisorStartError> {
    let shown = config.socket.display().to_string();
    let listen_error = |error: std::io::Error| SupervisorStartError::Listen {
        path: shown.clone(),
        reason: error.to_string(),
    };
    for dir in [&config.logs_dir, &config.records_dir] {
        fs::create_dir_all(dir).map_err(listen_error)?;
    }
    fs::set_permissions(&config.records_dir, fs::Permissions::from_mode(0o700))
        .map_err(listen_error)?;
    match fs::remove_file(&config.socket) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(listen_error(error)),
    }
    let listener = UnixListener::bind(&config.socket).map_err(listen_error)?;
    fs::set_permissions(&config.socket, fs::Permissions::from_mode(0o600)).map_err(listen_error)?;
    if let Some(networks) = &config.networks {
        networks.resume();
    }
    let config = std::sync::Arc::new(config);
    std::thread::Builder::new()
        .name("process-supervisor".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let config = config.clone();
                let spawned = std::thread::Builder::new()
                    .name("process-supervisor-call".into())
                    .spawn(move || serve_machine(&config, stream));
                if let Err(error) = spawned {
                    tracing::warn!(%error, "cannot serve a call of the process supervisor");
                }
            }
        })
        .map_err(listen_error)?;
    Ok(())
}

/// One request read from `stream`.
fn read_request(stream: &UnixStream) -> Result<Request, Reply> {
    let mut line = Vec::new();
    // One line: a caller sends nothing after it.
    let read = BufReader::new(stream.take(MAX_LINE as u64)).read_until(b'\n', &mut line);
    match read {
        Err(error) => Err(Reply::Error {
            message: format!("cannot read the request: {error}"),
        }),
        Ok(_) => serde_json::from_slice::<Request>(&line).map_err(|error| Reply::Error {
            message: format!("not a request: {error}"),
        }),
    }
}

/// Writes `reply` as one line; false when the caller went away.
fn send(stream: &UnixStream, reply: &Reply) -> bool {
    let Ok(mut text) = serde_json::to_vec(reply) else {
        return false;
    };
    text.push(b'\n');
    let mut stream = stream;
    stream.write_all(&text).is_ok()
}

/// A call on the machine's socket: only the runner's `Open` of a build's.
fn serve_machine(config: &std::sync::Arc<SupervisorConfig>, stream: UnixStream) {
    match read_request(&stream) {
        Err(reply) => {
            send(&stream, &reply);
        }
        Ok(Request::Open {
            workspace_id,
            socket,
            agent_url,
            uid,
            adopt,
        }) => {
            let mut scope = BuildScope::new(&workspace_id, agent_url.as_deref());
            scope.uid = uid;
            if let Some(uid) = uid {
                if let Err(message) = adopt_volumes(config, uid, &adopt) {
                    send(&stream, &Reply::Error { message });
                    return;
                }
            }
            serve_build_socket(config, stream, scope, PathBuf::from(socket))
        }
        Ok(_) => {
            send(
                &stream,
                &Reply::Error {
                    message: "the machine's socket opens builds' sockets only: ask on the build's own (ABODE_PROCESS_SUPERVISOR)".into(),
                },
            );
        }
    }
}

/// Listens on `socket` for the build `scope` while `control` (the runner's
/// connection) stays open, then removes it.
fn serve_build_socket(
    config: &std::sync::Arc<SupervisorConfig>,
    control: UnixStream,
    scope: BuildScope,
    socket: PathBuf,
) {
    let listener = match listen_for_build(config, &scope.workspace_id, &socket) {
        Ok(listener) => listener,
        Err(message) => {
            send(&control, &Reply::Error { message });
            return;
        }
    };
    if send(&control, &Reply::Opened) {
        serve_build_calls(config, &control, &listener, &scope);
    }
    drop(listener);
    // The build's work dir: a link put there since is removed, never followed.
    let _ = fs::remove_file(&socket);
}

fn listen_for_build(
    config: &SupervisorConfig,
    workspace_id: &str,
    socket: &Path,
) -> Result<UnixListener, String> {
    if workspace_id.trim().is_empty() || !socket.is_absolute() {
        return Err("a build's socket needs a workspace and an absolute path".into());
    }
    let failed = |error: &dyn std::fmt::Display| {
        format!(
            "cannot listen on the build's process supervisor socket {}: {error}",
            socket.display()
        )
    };
    match fs::remove_file(socket) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(failed(&error)),
    }
    let listener = UnixListener::bind(socket).map_err(|error| failed(&error))?;
    fs::set_permissions(socket, fs::Permissions::from_mode(0o600))
        .map_err(|error| failed(&error))?;
    config
        .sandbox
        .hand_over_one(socket)
        .map_err(|error| failed(&error))?;
    listener
        .set_nonblocking(true)
        .map_err(|error| failed(&error))?;
    Ok(listener)
}

/// Serves each call on the build's socket on a thread of its own, until
/// the runner's connection ends (or says anything: it says nothing more).
fn serve_build_calls(
    config: &std::sync::Arc<SupervisorConfig>,
    control: &UnixStream,
    listener: &UnixListener,
    scope: &BuildScope,
) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    loop {
        let mut fds = [
            PollFd::new(control.as_fd(), PollFlags::POLLIN),
            PollFd::new(listener.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(error) => {
                tracing::warn!(%error, "the process supervisor stops listening for a build");
                return;
            }
        }
        if fds[0].any().unwrap_or(true) {
            return;
        }
        loop {
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    tracing::warn!(%error, "the process supervisor cannot accept a build's call");
                    break;
                }
            };
            if stream.set_nonblocking(false).is_err() {
                continue;
            }
            let config = config.clone();
            let scope = scope.clone();
            let spawned = std::thread::Builder::new()
                .name("process-supervisor-call".into())
                .spawn(move || {
                    let reply = match read_request(&stream) {
                        Err(reply) => reply,
                        Ok(request) => answer(&config, &scope, request),
                    };
                    // A caller that went away wants no answer.
                    send(&stream, &reply);
                });
            if let Err(error) = spawned {
                tracing::warn!(%error, "cannot serve a call of the process supervisor");
            }
        }
    }
}

/// What a request of the build `scope` gets: the one place each operation
/// is decided.
pub fn answer(config: &SupervisorConfig, scope: &BuildScope, request: Request) -> Reply {
    let workspace_id = scope.workspace_id.as_str();
    let result = match request {
        Request::Start { command, env, dir } => start_process(config, scope, &command, &env, &dir),
        Request::Status { id } => Ok(Reply::Status {
            running: recorded(config, &id, workspace_id)
                .is_some_and(|(identity, _)| identity.is_running()),
        }),
        Request::Stop { id, grace_seconds } => {
            stop_process(config, workspace_id, &id, grace_seconds)
        }
        Request::RemoveVolume { dir } => remove_volume(config, scope, &dir),
        Request::Open { .. } => Err("a build's socket opens no other".into()),
    };
    result.unwrap_or_else(|message| Reply::Error { message })
}

/// The record of `id`, when the supervisor started it for `workspace_id`:
/// its identity and log. A process of another workspace is not there for
/// it. A record from before workspaces were recorded (one line) is
/// everyone's, as it was, until its process is stopped.
fn recorded(
    config: &SupervisorConfig,
    id: &str,
    workspace_id: &str,
) -> Option<(Identity, PathBuf)> {
    let identity = Identity::parse(id)?;
    let record = fs::read_to_string(config.records_dir.join(identity.to_text())).ok()?;
    let mut lines = record.lines();
    let log = lines.next()?.trim();
    if let Some(owner) = lines
        .next()
        .map(str::trim)
        .filter(|owner| !owner.is_empty())
    {
        if owner != workspace_id {
            tracing::warn!(
                asking = workspace_id,
                owner,
                process = id,
                "a build asked about another workspace's process: answered as unknown"
            );
            return None;
        }
    }
    Some((identity, PathBuf::from(log)))
}

/// The volume that holds `dir`: `<volumes dir>/<name>`, both real paths.
fn volume_of(config: &SupervisorConfig, dir: &str) -> Result<(PathBuf, PathBuf), String> {
    let refused = || {
        format!(
            "abode_process dir {dir:?} is not in an abode_volume: a sandboxed process's dir is its volume's path (or a directory in it)"
        )
    };
    let volumes = fs::canonicalize(&config.volumes_dir).map_err(|_| refused())?;
    // The volume the path names, as written: a link inside one volume must
    // not lead the process into another's.
    let named = Path::new(dir)
        .strip_prefix(&config.volumes_dir)
        .or_else(|_| Path::new(dir).strip_prefix(&volumes))
        .map_err(|_| refused())?
        .components()
        .next()
        .ok_or_else(refused)?
        .as_os_str()
        .to_owned();
    let dir = fs::canonicalize(dir).map_err(|_| refused())?;
    let name = dir
        .strip_prefix(&volumes)
        .map_err(|_| refused())?
        .components()
        .next()
        .ok_or_else(refused)?;
    if name.as_os_str() != named {
        return Err(refused());
    }
    Ok((volumes.join(name), dir))
}

/// Whose a volume is: `Free` until a workspace has run in it (made by
/// Terraform's user, or by root), then its workspace's uid's.
#[derive(Debug, PartialEq, Eq)]
enum VolumeOwner {
    Free,
    Workspace(u32),
}

fn owner_of(config: &SupervisorConfig, volume: &Path) -> Result<VolumeOwner, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::symlink_metadata(volume)
        .map_err(|error| format!("cannot read the volume {}: {error}", volume.display()))?;
    if !meta.is_dir() {
        return Err(format!(
            "the volume {} is not a directory",
            volume.display()
        ));
    }
    let terraform = config.sandbox.user().map(|user| user.uid);
    if meta.uid() == 0 || Some(meta.uid()) == terraform {
        Ok(VolumeOwner::Free)
    } else {
        Ok(VolumeOwner::Workspace(meta.uid()))
    }
}

/// Gives the volume to `uid` before a process of its workspace runs in it:
/// everything in it, and private to it (0700). A volume another workspace
/// has run in is not this one's: refused.
fn claim_volume(config: &SupervisorConfig, volume: &Path, uid: u32) -> Result<(), String> {
    match owner_of(config, volume)? {
        VolumeOwner::Workspace(owner) if owner == uid => Ok(()),
        VolumeOwner::Workspace(_) => Err(format!(
            "the volume {} belongs to another workspace: a process runs only in its own workspace's volumes",
            volume.display()
        )),
        VolumeOwner::Free => give_volume(volume, uid),
    }
}

fn give_volume(volume: &Path, uid: u32) -> Result<(), String> {
    use nix::fcntl::OFlag;
    use std::os::fd::AsRawFd;
    let failed = |error: &dyn std::fmt::Display| {
        format!(
            "cannot give the volume {} to its workspace: {error}",
            volume.display()
        )
    };
    let mut top = nix::dir::Dir::open(
        volume,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|error| failed(&error))?;
    give_tree(&mut top, uid, 0).map_err(|error| failed(&error))?;
    let owner = Some(nix::unistd::Uid::from_raw(uid));
    let group = Some(nix::unistd::Gid::from_raw(uid));
    nix::unistd::fchown(top.as_raw_fd(), owner, group).map_err(|error| failed(&error))?;
    nix::sys::stat::fchmod(
        top.as_raw_fd(),
        nix::sys::stat::Mode::from_bits_truncate(0o700),
    )
    .map_err(|error| failed(&error))
}

/// Gives everything under the open directory `dir` to `uid`, never
/// following a link: each step is relative to a directory already open, so
/// a name swapped for a link meanwhile leads nowhere else.
fn give_tree(dir: &mut nix::dir::Dir, uid: u32, depth: usize) -> Result<(), nix::errno::Errno> {
    use nix::fcntl::{AtFlags, OFlag};
    use std::os::fd::AsRawFd;
    if depth > 256 {
        return Err(nix::errno::Errno::ELOOP);
    }
    let owner = Some(nix::unistd::Uid::from_raw(uid));
    let group = Some(nix::unistd::Gid::from_raw(uid));
    let mut names = Vec::new();
    for entry in dir.iter() {
        let entry = entry?;
        let name = entry.file_name().to_owned();
        if name.as_bytes() == b"." || name.as_bytes() == b".." {
            continue;
        }
        names.push((name, entry.file_type()));
    }
    let at = dir.as_raw_fd();
    for (name, kind) in names {
        match nix::unistd::fchownat(
            Some(at),
            name.as_c_str(),
            owner,
            group,
            AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(()) | Err(nix::errno::Errno::ENOENT) => {}
            Err(error) => return Err(error),
        }
        if kind == Some(nix::dir::Type::Directory) {
            match nix::dir::Dir::openat(
                Some(at),
                name.as_c_str(),
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                nix::sys::stat::Mode::empty(),
            ) {
                Ok(mut child) => give_tree(&mut child, uid, depth + 1)?,
                // Swapped for a link, or gone: nothing of it to give.
                Err(
                    nix::errno::Errno::ELOOP
                    | nix::errno::Errno::ENOTDIR
                    | nix::errno::Errno::ENOENT,
                ) => {}
                Err(error) => return Err(error),
            }
        }
    }
    Ok(())
}

/// `/etc/passwd` and `/etc/group` as the host's plus the workspace's own
/// user, `abode`, at `uid` with `home`: tools that look their user up (scp,
/// ssh, git, a shell's prompt) find it. Written anew for each start.
fn user_database(
    config: &SupervisorConfig,
    uid: u32,
    home: &Path,
) -> Result<Vec<(PathBuf, PathBuf)>, String> {
    // Beside the records, never among them (each record is a process).
    let dir = config
        .records_dir
        .with_file_name("supervised-etc")
        .join(uid.to_string());
    let failed =
        |error: std::io::Error| format!("cannot write the workspace's user database: {error}");
    fs::create_dir_all(&dir).map_err(failed)?;
    let mut files = Vec::new();
    for (name, line) in [
        (
            "passwd",
            format!(
                "abode:x:{uid}:{uid}:Abode workspace:{}:/bin/sh\n",
                home.display()
            ),
        ),
        ("group", format!("abode:x:{uid}:\n")),
    ] {
        let host = Path::new("/etc").join(name);
        let mut text = fs::read_to_string(&host).unwrap_or_default();
        // Nobody else of the host at this uid: the range holds no host user.
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&line);
        let path = dir.join(name);
        fs::write(&path, text).map_err(failed)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).map_err(failed)?;
        files.push((path, host));
    }
    Ok(files)
}

/// The volumes a build adopts from a deleted workspace (`Request::Open`'s
/// `adopt`, from the platform's own decision): given to the adopting
/// workspace's uid.
fn adopt_volumes(config: &SupervisorConfig, uid: u32, names: &[String]) -> Result<(), String> {
    for name in names {
        let plain = Path::new(name).components().count() == 1
            && !name.starts_with('.')
            && !name.contains('/');
        if !plain {
            return Err(format!(
                "cannot adopt the volume {name:?}: not a volume name"
            ));
        }
        let volume = config.volumes_dir.join(name);
        match fs::symlink_metadata(&volume) {
            Ok(meta) if meta.is_dir() => give_volume(&volume, uid)?,
            // Import says what is missing, in Terraform's words.
            _ => continue,
        }
    }
    Ok(())
}

/// An `abode_volume`'s destroy: only a volume of this build's workspace
/// (or one no workspace has run in yet).
fn remove_volume(
    config: &SupervisorConfig,
    scope: &BuildScope,
    dir: &str,
) -> Result<Reply, String> {
    let volumes = fs::canonicalize(&config.volumes_dir).map_err(|error| error.to_string())?;
    let path = Path::new(dir);
    let name = path
        .strip_prefix(&config.volumes_dir)
        .or_else(|_| path.strip_prefix(&volumes))
        .ok()
        .filter(|rest| rest.components().count() == 1)
        .ok_or_else(|| format!("{dir:?} is not a volume of this machine"))?;
    let volume = volumes.join(name);
    let owner = match owner_of(config, &volume) {
        Ok(owner) => owner,
        Err(_) if fs::symlink_metadata(&volume).is_err() => return Ok(Reply::Stopped),
        Err(message) => return Err(message),
    };
    if let VolumeOwner::Workspace(owner) = owner {
        if scope.uid != Some(owner) {
            tracing::warn!(
                asking = scope.workspace_id.as_str(),
                volume = %volume.display(),
                "a build asked to remove another workspace's volume: refused"
            );
            return Err(format!(
                "the volume {} belongs to another workspace",
                volume.display()
            ));
        }
    }
    fs::remove_dir_all(&volume)
        .map_err(|error| format!("cannot delete the volume {}: {error}", volume.display()))?;
    Ok(Reply::Stopped)
}

/// An open volume, closed when dropped.
struct VolumeFd(std::os::fd::RawFd);

impl Drop for VolumeFd {
    fn drop(&mut self) {
        let _ = nix::unistd::close(self.0);
    }
}

/// Opens the volume `path` (a directory, never through a link at its
/// name) without close-on-exec, for bwrap's `--bind-fd`: a template can
/// swap the name for a link after the check, never the directory opened.
fn open_volume(path: &Path) -> Result<VolumeFd, String> {
    use nix::fcntl::{open, OFlag};
    let refused = |why: String| format!("cannot open the volume {}: {why}", path.display());
    let fd = open(
        path,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_DIRECTORY,
        nix::sys::stat::Mode::empty(),
    )
    .map(VolumeFd)
    .map_err(|error| refused(error.to_string()))?;
    let opened = fs::read_link(format!("/proc/self/fd/{}", fd.0))
        .map_err(|error| refused(error.to_string()))?;
    if opened != path {
        return Err(refused(format!("it is {} now", opened.display())));
    }
    Ok(fd)
}

fn start_process(
    config: &SupervisorConfig,
    scope: &BuildScope,
    command: &[String],
    env: &[(String, String)],
    dir: &str,
) -> Result<Reply, String> {
    let Some((program, args)) = command.split_first() else {
        return Err("abode_process command is empty".into());
    };
    let workspace_id = scope.workspace_id.as_str();
    let (volume, dir) = volume_of(config, dir)?;
    if let Some(uid) = scope.uid {
        claim_volume(config, &volume, uid)?;
    }
    // The workspace's own network, made with its first process.
    let namespace = match &config.networks {
        Some(networks) => Some(networks.join(workspace_id, scope.forward)?),
        None => None,
    };
    let log_path = config
        .logs_dir
        .join(format!("{}.log", uuid::Uuid::new_v4()));
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&log_path)
        .map_err(|error| format!("cannot create the process log: {error}"))?;
    let log_for_stderr = log
        .try_clone()
        .map_err(|error| format!("cannot share the process log: {error}"))?;
    // One start at a time: the volume's descriptor is inheritable while it
    // is open, and no other workspace's process may inherit it.
    let one_at_a_time = SPAWNING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let volume_fd = open_volume(&volume)?;
    let mut read_only = config.read_only.clone();
    if !read_only.contains(&config.exec_helper) {
        read_only.push(config.exec_helper.clone());
    }
    let view = View {
        read_only,
        read_write: Vec::new(),
        read_write_fds: vec![(volume_fd.0, volume.clone())],
        dir: dir.clone(),
        operator_mounts: false,
        run_as: scope.uid,
        etc_files: match scope.uid {
            Some(uid) => user_database(config, uid, &volume)?,
            None => Vec::new(),
        },
    };
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    let wrapped = config
        .sandbox
        .wrap_with_env(&view, &config.exec_helper, Path::new(program), &args, env)
        .map_err(|error| format!("abode_process env: {error}"))?;
    let (program_run, args_run) = match &namespace {
        Some(namespace) => namespace.enter(wrapped.program, wrapped.args),
        None => (wrapped.program, wrapped.args),
    };
    let mut sandboxed = Command::new(program_run);
    let mut child = sandboxed
        .args(args_run)
        // bwrap and setpriv run privileged: nothing of the template's reaches
        // them (its variables wait on standard input, read after the drop).
        .env_clear()
        .env("PATH", SAFE_PATH)
        .current_dir("/")
        .stdin(Stdio::from(wrapped.stdin))
        .stdout(log)
        .stderr(log_for_stderr)
        // Its own group: stopped as one, and no signal meant for the
        // server's group reaches it.
        .process_group(0)
        .spawn()
        .map_err(|error| format!("cannot start the sandbox of `{program}`: {error}"))?;
    drop(volume_fd);
    drop(one_at_a_time);
    let pid = i32::try_from(child.id()).map_err(|error| error.to_string())?;
    let identity = Identity::of(pid);
    std::thread::sleep(STARTUP_CHECK);
    if let Ok(Some(status)) = child.try_wait() {
        if !status.success() {
            // The log holds the workspace's output (maybe secrets): named, not shown.
            return Err(format!(
                "`{program}` exited with {status} right after starting; its output is in {}",
                log_path.display()
            ));
        }
    }
    // Reaped here while this server runs; by init once it is gone.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    let Some(identity) = identity else {
        return Err(format!(
            "the process {pid} ended before its start time could be read"
        ));
    };
    let record = config.records_dir.join(identity.to_text());
    fs::write(&record, format!("{}\n{workspace_id}\n", log_path.display()))
        .map_err(|error| format!("cannot record the process: {error}"))?;
    Ok(Reply::Started {
        id: identity.to_text(),
        pid: i64::from(pid),
        log_path: log_path.display().to_string(),
    })
}

fn stop_process(
    config: &SupervisorConfig,
    workspace_id: &str,
    id: &str,
    grace_seconds: u64,
) -> Result<Reply, String> {
    let Some((identity, log)) = recorded(config, id, workspace_id) else {
        // Not one of this workspace's (or stopped already): nothing to signal.
        return Ok(Reply::Stopped);
    };
    if identity.is_running() {
        // The first process of its PID namespace: when it dies, the kernel
        // kills everything else in the namespace, sessions of their own included.
        let namespace_init = abode_procfs::children(identity.pid);
        let group = Pid::from_raw(identity.pid);
        let _ = killpg(group, Signal::SIGTERM);
        let gone = || {
            !abode_procfs::group_running(identity.pid)
                && namespace_init.iter().all(|init| !init.is_running())
        };
        if !wait_until(gone, Duration::from_secs(grace_seconds)) {
            for init in namespace_init.iter().filter(|init| init.is_running()) {
                let _ = kill(Pid::from_raw(init.pid), Signal::SIGKILL);
            }
            let _ = killpg(group, Signal::SIGKILL);
            if !wait_until(gone, Duration::from_secs(5)) {
                return Err(format!(
                    "process {} is still running after SIGTERM and SIGKILL",
                    identity.pid
                ));
            }
        }
    }
    let _ = fs::remove_file(&log);
    let _ = fs::remove_file(config.records_dir.join(identity.to_text()));
    if let Some(networks) = &config.networks {
        if !has_running_process(config, workspace_id) {
            networks.leave(workspace_id);
        }
    }
    Ok(Reply::Stopped)
}

/// Whether a process recorded as `workspace_id`'s still runs.
fn has_running_process(config: &SupervisorConfig, workspace_id: &str) -> bool {
    let Ok(entries) = fs::read_dir(&config.records_dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        recorded(config, &name.to_string_lossy(), workspace_id)
            .is_some_and(|(identity, _)| identity.is_running())
    })
}

fn wait_until(done: impl Fn() -> bool, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn config(root: &Path) -> SupervisorConfig {
        SupervisorConfig {
            sandbox: crate::Sandbox {
                bwrap: "/usr/bin/bwrap".into(),
                drop_to: None,
                as_root: false,
                mounts: Vec::new(),
            },
            socket: root.join("supervisor.sock"),
            volumes_dir: root.join("volumes"),
            logs_dir: root.join("logs"),
            records_dir: root.join("records"),
            read_only: Vec::new(),
            exec_helper: "/usr/bin/abode".into(),
            networks: None,
        }
    }

    fn scope(workspace_id: &str) -> BuildScope {
        BuildScope::new(workspace_id, None)
    }

    /// A process's dir names its volume; a link in one volume never leads
    /// it into another's, and a volume that is a link is never opened.
    #[test]
    fn a_process_gets_the_volume_its_dir_names_and_nothing_a_link_points_to() {
        let root = tempfile::tempdir().unwrap();
        let volumes = root.path().join("volumes");
        for name in ["mine", "other"] {
            fs::create_dir_all(volumes.join(name)).unwrap();
        }
        fs::create_dir(volumes.join("mine/src")).unwrap();
        std::os::unix::fs::symlink("../other", volumes.join("mine/code")).unwrap();
        std::os::unix::fs::symlink(root.path(), volumes.join("swapped")).unwrap();
        let config = config(root.path());
        let canonical = fs::canonicalize(&volumes).unwrap();
        let (volume, _) = volume_of(&config, volumes.join("mine/src").to_str().unwrap()).unwrap();
        assert_eq!(volume, canonical.join("mine"));
        for refused in ["mine/code", "swapped", "../logs"] {
            let dir = volumes.join(refused);
            assert!(
                volume_of(&config, dir.to_str().unwrap()).is_err(),
                "{refused}"
            );
        }
        assert!(open_volume(&canonical.join("mine")).is_ok());
        assert!(open_volume(&canonical.join("swapped")).is_err());
    }

    /// A process is answered for to its own workspace's builds only; to
    /// another's it does not exist. A record from before workspaces were
    /// recorded is everyone's, as it was.
    #[test]
    fn a_process_is_there_only_for_its_own_workspace() {
        let root = tempfile::tempdir().unwrap();
        let config = config(root.path());
        fs::create_dir_all(&config.records_dir).unwrap();
        let me = Identity::of(i32::try_from(std::process::id()).unwrap()).unwrap();
        let id = me.to_text();
        let record = config.records_dir.join(&id);
        fs::write(&record, "/logs/a.log\nworkspace-a\n").unwrap();
        let (identity, log) = recorded(&config, &id, "workspace-a").unwrap();
        assert_eq!((identity, log), (me, PathBuf::from("/logs/a.log")));
        assert!(recorded(&config, &id, "workspace-b").is_none());
        let status = answer(
            &config,
            &scope("workspace-b"),
            Request::Status { id: id.clone() },
        );
        assert_eq!(status, Reply::Status { running: false });
        let stop = Request::Stop {
            id: id.clone(),
            grace_seconds: 0,
        };
        // This test's own process: a stop that signalled would end it.
        assert_eq!(answer(&config, &scope("workspace-b"), stop), Reply::Stopped);
        assert!(
            record.exists(),
            "another workspace's stop removed the record"
        );
        let status = answer(
            &config,
            &scope("workspace-a"),
            Request::Status { id: id.clone() },
        );
        assert_eq!(status, Reply::Status { running: true });
        fs::write(&record, "/logs/a.log\n").unwrap();
        assert!(recorded(&config, &id, "workspace-b").is_some());
        let open = Request::Open {
            workspace_id: "workspace-a".into(),
            socket: root.path().join("x.sock").display().to_string(),
            agent_url: None,
            uid: None,
            adopt: Vec::new(),
        };
        assert!(matches!(
            answer(&config, &scope("workspace-b"), open),
            Reply::Error { .. }
        ));
    }

    /// The machine's socket only opens builds' sockets; a build's listens
    /// while the runner's connection lasts, answers for its workspace, and
    /// is gone after.
    #[test]
    fn a_builds_socket_lives_as_long_as_the_runners_connection() {
        use abode_contract::supervisor::{call, call_with_patience, open_build};
        let root = tempfile::tempdir().unwrap();
        let config = config(root.path());
        start(config.clone()).unwrap();
        let mode = fs::metadata(&config.socket).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let timeout = Duration::from_secs(5);
        let refused = call(
            &config.socket,
            &Request::Status { id: "1-2".into() },
            timeout,
        )
        .unwrap();
        assert!(matches!(refused, Reply::Error { .. }), "{refused:?}");
        let work = root.path().join("work");
        fs::create_dir_all(&work).unwrap();
        let path = work.join("supervisor.sock");
        let of = abode_contract::supervisor::BuildOf {
            workspace_id: "workspace-a".into(),
            ..Default::default()
        };
        let build = open_build(&config.socket, &of, &path, timeout).unwrap();
        assert_eq!(build.path(), path);
        let status = call(&path, &Request::Status { id: "1-2".into() }, timeout).unwrap();
        assert_eq!(status, Reply::Status { running: false });
        drop(build);
        let deadline = Instant::now() + Duration::from_secs(5);
        while path.exists() && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        assert!(!path.exists(), "the build's socket outlived its run");
        // Gone for good: asked without waiting for a restart.
        let gone = call_with_patience(
            &path,
            &Request::Status { id: "1-2".into() },
            timeout,
            Duration::ZERO,
        );
        assert!(gone.is_err());
    }
}
