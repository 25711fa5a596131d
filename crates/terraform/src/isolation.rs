//! What a Terraform run sees when it runs in a sandbox (`abode-sandbox`):
//! the machine-wide part (the Terraform binary and the provider mirror
//! read-only; the volumes dir and the process supervisor's socket) plus,
//! per run, its own work dir. Nothing else of the machine but the system:
//! not the data dir, the database, other builds' work dirs, the server's
//! `/proc` or its environment.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use abode_sandbox::{Sandbox, SandboxError, View};

/// Where a sandboxed Terraform finds its plugins' sockets, its home and its
/// temporary files: the sandbox's own `/tmp`, seen by no other run.
const SANDBOX_TMP: &str = "/tmp";

/// How this machine's Terraform runs are sandboxed.
#[derive(Debug, Clone)]
pub struct Isolation {
    sandbox: Sandbox,
    terraform: PathBuf,
    /// The mirror's provider executable, which serves each command but
    /// `init` from one process (`abode_contract::launch`); `None`: Terraform
    /// starts the provider itself, several times a command.
    launcher: Option<PathBuf>,
    read_only: Vec<PathBuf>,
    read_write: Vec<PathBuf>,
}

impl Isolation {
    /// `terraform` is found on `path` (the PATH Terraform runs get) now, so
    /// that a binary outside the system dirs is bound into the sandbox.
    pub fn new(
        sandbox: Sandbox,
        path: Option<&str>,
        read_only: Vec<PathBuf>,
        read_write: Vec<PathBuf>,
    ) -> Result<Isolation, SandboxError> {
        let terraform = std::env::split_paths(path.unwrap_or_default())
            .map(|dir| dir.join("terraform"))
            .find(|candidate| candidate.is_absolute() && candidate.is_file())
            .map(|found| std::fs::canonicalize(&found).unwrap_or(found))
            .unwrap_or_else(|| PathBuf::from("terraform"));
        let mut read_only = read_only;
        if terraform.is_absolute() && !abode_sandbox::under_system_dirs(&terraform) {
            read_only.push(terraform.clone());
        }
        Ok(Isolation {
            sandbox,
            terraform,
            launcher: None,
            read_only,
            read_write,
        })
    }

    /// Runs every command but `init` through `launcher`, an executable the
    /// runs see read-only (the mirror's provider), when it is a file.
    pub fn with_launcher(mut self, launcher: PathBuf) -> Isolation {
        self.launcher = launcher.is_file().then_some(launcher);
        self
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// What every run sees read-only (Terraform, the provider mirror).
    pub fn read_only_paths(&self) -> &[PathBuf] {
        &self.read_only
    }

    /// Gives a run's work dir (everything in it) to the sandbox's user.
    pub fn hand_over(&self, dir: &Path) -> Result<(), SandboxError> {
        self.sandbox.hand_over(dir)
    }

    /// The program and arguments of `terraform args` run in `dir`, seeing
    /// `work_dir` read-write.
    /// With a launcher, `then_show` (a saved plan and a file) has the same
    /// launch write the plan's JSON to that file (`abode_contract::launch`).
    pub(crate) fn wrap(
        &self,
        work_dir: &Path,
        dir: &Path,
        args: &[OsString],
        then_show: Option<&(PathBuf, PathBuf)>,
    ) -> (PathBuf, Vec<OsString>) {
        let mut read_write = self.read_write.clone();
        read_write.push(work_dir.to_path_buf());
        let view = View {
            read_only: self.read_only.clone(),
            read_write,
            read_write_fds: Vec::new(),
            dir: dir.to_path_buf(),
            operator_mounts: true,
            run_as: None,
            etc_files: Vec::new(),
        };
        let subcommand = args.first().and_then(|arg| arg.to_str()).unwrap_or("");
        match &self.launcher {
            Some(launcher) if abode_contract::launch::launched(subcommand) => {
                let launch = abode_contract::launch::Launch {
                    terraform: self.terraform.clone().into_os_string(),
                    args: args.to_vec(),
                    then_show: then_show.cloned(),
                };
                self.sandbox.wrap(&view, launcher, &launch.to_args())
            }
            _ => self.sandbox.wrap(&view, &self.terraform, args),
        }
    }

    /// What a sandboxed run's environment says instead of the server's:
    /// home, temporary files and plugin sockets in the sandbox's own `/tmp`,
    /// and the user it runs as.
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("HOME", SANDBOX_TMP.to_string()),
            ("TMPDIR", SANDBOX_TMP.to_string()),
            (
                crate::environment::PLUGIN_SOCKET_DIR_ENV,
                SANDBOX_TMP.to_string(),
            ),
        ];
        if let Some(user) = self.sandbox.user() {
            env.push(("USER", user.name.clone()));
            env.push(("LOGNAME", user.name.clone()));
        }
        env
    }
}
