//! A machine that runs builds, set up at its start: a server with embedded
//! provisioners and an external daemon (`abode provisioner start`) alike.
//! Its data dir is made private, this binary's provider is installed in the
//! offline mirror, and every Terraform run and workspace process gets the
//! sandbox with its process supervisor (`abode-sandbox`; docs/security.md).
//! A machine that cannot sandbox stops here with one line.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use abode_sandbox::network::WorkspaceNetwork;
pub use abode_sandbox::network::{HandOff, LocalServer};
use abode_sandbox::network::{NetworkError, Networks};
use abode_sandbox::supervisor::{self, SupervisorStartError};
pub use abode_sandbox::uids::{UidRange, UidRangeError};
pub use abode_sandbox::User;
use abode_sandbox::{Mount, Sandbox, SandboxError, Settings};

use crate::isolation::Isolation;
use crate::mirror::{current_platform, Mirror, MirrorError, PROVIDER_VERSION};

/// The user Terraform runs as when this process is root and no
/// `--terraform-user` is given: on every Debian machine, owns nothing.
pub const DEFAULT_USER: &str = "nobody";

/// The file name of the provider-only executable, built and installed beside `abode`.
pub const PROVIDER_ONLY_EXECUTABLE: &str = "terraform-provider-abode";

/// Why a machine could not be set up to run builds.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    #[error("cannot read the current directory")]
    CurrentDir(#[source] std::io::Error),
    #[error("cannot locate the abode executable")]
    Executable(#[source] std::io::Error),
    #[error("cannot create the data dir {}", path.display())]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Mirror(#[from] MirrorError),
    #[error("cannot install the abode provider into the mirror")]
    InstallProvider(#[source] MirrorError),
    #[error("{what} {} is under a system directory every Terraform sandbox shows (/usr, /opt, ...), so templates could read it: keep it elsewhere (e.g. /var/lib/abode)", path.display())]
    UnderSystemDir { what: &'static str, path: PathBuf },
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error("Terraform would run as {DEFAULT_USER}: pass --terraform-user USER")]
    DefaultUser(#[source] SandboxError),
    #[error("--terraform-user {name}: only a server running as root can run Terraform as another user (this one runs as {me})")]
    NotRoot { name: String, me: String },
    #[error("cannot create {}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Supervisor(#[from] SupervisorStartError),
    #[error(transparent)]
    Network(#[from] NetworkError),
    #[error(transparent)]
    Uids(#[from] UidRangeError),
    #[error("--workspace-uids needs a server running as root with the sandbox on (--terraform-sandbox on), to run workspaces as other users: pass --workspace-uids off")]
    UidsNeedRoot,
    #[error("{0} (or pass --workspace-uids FIRST-LAST with a free range, or off)")]
    DefaultUids(UidRangeError),
    #[error("cannot read {path}")]
    UserDatabase {
        path: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// `--workspace-uids`: not given, `off`, or a range.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WorkspaceUids {
    /// [`abode_sandbox::uids::DEFAULT_RANGE`] when this process is root and
    /// sandboxes; none otherwise.
    #[default]
    Default,
    Off,
    Range(UidRange),
}

/// The uids this server gives workspaces, checked against this machine's
/// users and groups and Terraform's user (`terraform_user`: the sandbox's,
/// when it has one of its own); `None`: workspaces run as the sandbox's user.
pub fn workspace_uids(
    setting: WorkspaceUids,
    sandboxed: bool,
    terraform_user: Option<&User>,
) -> Result<Option<UidRange>, MachineError> {
    let able = sandboxed && nix::unistd::geteuid().is_root() && terraform_user.is_some();
    let (range, default) = match setting {
        WorkspaceUids::Off => return Ok(None),
        WorkspaceUids::Default if !able => return Ok(None),
        WorkspaceUids::Default => (abode_sandbox::uids::DEFAULT_RANGE, true),
        WorkspaceUids::Range(_) if !able => return Err(MachineError::UidsNeedRoot),
        WorkspaceUids::Range(range) => (range, false),
    };
    let read = |path: &'static str| {
        std::fs::read_to_string(path).map_err(|source| MachineError::UserDatabase { path, source })
    };
    let (passwd, group) = (read("/etc/passwd")?, read("/etc/group")?);
    let reserved: Vec<(u32, String)> = terraform_user
        .map(|user| (user.uid, format!("Terraform's user {}", user.name)))
        .into_iter()
        .collect();
    match range.check_against(&passwd, &group, &reserved) {
        Ok(()) => Ok(Some(range)),
        Err(error) if default => Err(MachineError::DefaultUids(error)),
        Err(error) => Err(MachineError::Uids(error)),
    }
}

/// `path`, made absolute against the current directory.
pub fn absolute(path: PathBuf) -> Result<PathBuf, MachineError> {
    if path.is_absolute() {
        return Ok(path);
    }
    Ok(std::env::current_dir()
        .map_err(MachineError::CurrentDir)?
        .join(path))
}

/// The data dir of a process that runs builds (a server, a provisioner
/// daemon), made absolute and private to its user (0700, also when it
/// already existed: it holds states, plans and volumes), and the provider
/// mirror (given, or under it) with this binary's provider installed. A
/// note for the log when the provider installed is `abode` itself.
pub fn prepare_data_dir(
    data_dir: PathBuf,
    provider_mirror: Option<PathBuf>,
) -> Result<(PathBuf, PathBuf), MachineError> {
    let data_dir = absolute(data_dir)?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&data_dir)
        .and_then(|()| std::fs::set_permissions(&data_dir, std::fs::Permissions::from_mode(0o700)))
        .map_err(|source| MachineError::DataDir {
            path: data_dir.clone(),
            source,
        })?;
    let mirror_dir = match provider_mirror {
        Some(dir) => absolute(dir)?,
        None => data_dir.join("provider-mirror"),
    };
    let (provider_executable, note) = provider_executable()?;
    if let Some(note) = note {
        tracing::warn!("{note}");
    }
    Mirror::new(&mirror_dir)?
        .install(&provider_executable, PROVIDER_VERSION)
        .map_err(MachineError::InstallProvider)?;
    Ok((data_dir, mirror_dir))
}

/// The executable to install as the provider: the small provider-only one beside
/// this `abode` when it is there, else `abode` itself (which serves the provider
/// too, but Terraform hashes the whole file at every command: about 20 ms for the
/// full binary against a few for the small one).
/// The second value is a note for the person when it falls back.
pub fn provider_executable() -> Result<(PathBuf, Option<String>), MachineError> {
    let abode = std::env::current_exe().map_err(MachineError::Executable)?;
    let provider_only = abode.with_file_name(PROVIDER_ONLY_EXECUTABLE);
    let why_not = if provider_only.is_file() {
        // A copy left from another release would be installed under this
        // release's version: only the same version serves.
        let expected = format!("{PROVIDER_ONLY_EXECUTABLE} {PROVIDER_VERSION}");
        match std::process::Command::new(&provider_only)
            .arg("--version")
            .output()
        {
            Ok(output) if String::from_utf8_lossy(&output.stdout).trim() == expected => {
                return Ok((provider_only, None));
            }
            Ok(output) => format!(
                "{} is not version {PROVIDER_VERSION} ({:?})",
                provider_only.display(),
                String::from_utf8_lossy(&output.stdout).trim()
            ),
            Err(error) => format!("{} does not run: {error}", provider_only.display()),
        }
    } else {
        format!(
            "{PROVIDER_ONLY_EXECUTABLE} is not beside {}",
            abode.display()
        )
    };
    let note = format!(
        "{why_not}: installing abode itself as the provider (it works; Terraform hashes the larger file at every command)"
    );
    Ok((abode, Some(note)))
}

/// How Terraform is sandboxed here (`--terraform-sandbox`,
/// `--terraform-user`, `--terraform-mount`).
#[derive(Debug, Clone, Default)]
pub struct SandboxSettings {
    /// `--terraform-sandbox off` turns it off.
    pub off: bool,
    pub user: Option<String>,
    /// `SRC[:DST][:ro]`, each checked here.
    pub mounts: Vec<String>,
    /// `--workspace-network`; not given: isolated when this process is
    /// root, the machine's otherwise (warned).
    pub network: Option<WorkspaceNetwork>,
    /// The addresses this process serves itself (a server, not a daemon):
    /// a workspace's connections to its access URL are handed to it.
    pub local_server: LocalServer,
}

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
fn refuse_visible(machine: &Machine<'_>) -> Result<(), MachineError> {
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
            return Err(MachineError::UnderSystemDir { what, path: real });
        }
    }
    Ok(())
}

/// The sandbox of this machine's Terraform runs and its process
/// supervisor's socket; `None` when the operator turned it off.
pub fn set_up_sandbox(
    settings: &SandboxSettings,
    machine: &Machine<'_>,
) -> Result<Option<(Arc<Isolation>, PathBuf)>, MachineError> {
    if settings.off && settings.network == Some(WorkspaceNetwork::Isolated) {
        return Err(MachineError::Network(NetworkError::NoSandbox));
    }
    if settings.off {
        tracing::warn!(
            "--terraform-sandbox off: Terraform and workspace processes run as this process's user, with its files and /proc in reach; templates can read the data dir, the database and this process's environment"
        );
        return Ok(None);
    }
    refuse_visible(machine)?;
    let mounts = settings
        .mounts
        .iter()
        .filter(|mount| !mount.trim().is_empty())
        .map(|mount| mount.parse::<Mount>())
        .collect::<Result<Vec<_>, _>>()?;
    let root = nix::unistd::geteuid().is_root();
    let user = match (&settings.user, root) {
        (Some(name), true) => Some(User::by_name(name)?),
        (None, true) => Some(User::by_name(DEFAULT_USER).map_err(MachineError::DefaultUser)?),
        (Some(name), false) => {
            let me = nix::unistd::User::from_uid(nix::unistd::geteuid())
                .ok()
                .flatten()
                .map(|user| user.name)
                .unwrap_or_default();
            if *name != me {
                return Err(MachineError::NotRoot {
                    name: name.clone(),
                    me,
                });
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
        std::fs::create_dir_all(dir).map_err(|source| MachineError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    // Terraform's provider creates the volumes, as that user, by name: it
    // may write and pass through the volumes dir, never list it (0300), so a
    // template learns no other workspace's volume from it.
    sandbox.hand_over_one(machine.volumes_dir)?;
    if sandbox.user().is_some() {
        std::fs::set_permissions(machine.volumes_dir, std::fs::Permissions::from_mode(0o300))
            .map_err(|source| MachineError::CreateDir {
                path: machine.volumes_dir.to_path_buf(),
                source,
            })?;
    }
    // Not asked for, on a machine that is not root: the shared network, said.
    let network = settings
        .network
        .unwrap_or(if nix::unistd::geteuid().is_root() {
            WorkspaceNetwork::Isolated
        } else {
            WorkspaceNetwork::Host
        });
    let networks = match network {
        WorkspaceNetwork::Isolated => Some(Arc::new(Networks::new(
            machine.data_dir.join("networks"),
            settings.local_server.clone(),
        )?)),
        WorkspaceNetwork::Host => {
            tracing::warn!("--workspace-network host: every workspace shares this machine's network: each reaches the others' ports and this machine's loopback services");
            None
        }
    };
    let socket = machine.data_dir.join("supervisor.sock");
    supervisor::start(supervisor::SupervisorConfig {
        sandbox: sandbox.clone(),
        socket: socket.clone(),
        volumes_dir: machine.volumes_dir.to_path_buf(),
        logs_dir: machine.process_logs_dir.to_path_buf(),
        records_dir: machine.data_dir.join("supervised"),
        read_only: vec![machine.agent_binary.to_path_buf()],
        exec_helper: machine.agent_binary.to_path_buf(),
        networks,
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
    )?
    .with_launcher(
        Mirror::new(machine.provider_mirror)?.provider_path(PROVIDER_VERSION, &current_platform()?),
    );
    match &user {
        Some(user) => {
            tracing::info!(user = %user.name, uid = user.uid, "Terraform runs sandboxed (bubblewrap), as {}", user.name)
        }
        None => tracing::info!("Terraform runs sandboxed (bubblewrap), as this process's user"),
    }
    Ok(Some((Arc::new(isolation), socket)))
}
