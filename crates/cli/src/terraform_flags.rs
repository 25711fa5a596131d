//! How Terraform runs on this machine: the flags `abode server` and `abode
//! provisioner start` share, since both run builds alike (the sandbox's are
//! `abode_terraform::machine`'s settings).

use std::path::PathBuf;

/// An on/off flag's value (`--terraform-sandbox`, `--app-dial-back`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// How Terraform runs here: flags shared by `abode server` and `abode
/// provisioner start`, which run builds alike.
#[derive(Debug, clap::Args)]
pub struct TerraformFlags {
    /// The provider mirror to install into and use [default: DATA_DIR/provider-mirror].
    #[arg(long, env = "ABODE_PROVIDER_MIRROR")]
    pub provider_mirror: Option<PathBuf>,
    /// Pass this variable of this process's environment to Terraform runs
    /// (and so to providers and templates), e.g. cloud credentials; NAME or
    /// PREFIX_* (repeatable). Only PATH, HOME, USER, LOGNAME, LANG, LC_*, TZ
    /// and TMPDIR pass otherwise; ABODE_* and TF_* never do.
    #[arg(
        long = "terraform-env",
        value_name = "NAME",
        env = "ABODE_TERRAFORM_ENV",
        value_delimiter = ','
    )]
    pub terraform_env: Vec<String>,
    /// Seconds a canceled Terraform run gets after SIGINT before it is killed.
    #[arg(long, env = "ABODE_CANCEL_GRACE", default_value_t = 30)]
    pub cancel_grace: u64,
    /// Run every Terraform run and workspace process in a bubblewrap
    /// sandbox (docs/security.md); `off` lets templates read this
    /// process's files, environment and /proc.
    #[arg(long, env = "ABODE_TERRAFORM_SANDBOX", value_enum, default_value_t = OnOff::On)]
    pub terraform_sandbox: OnOff,
    /// The unprivileged user Terraform and workspace processes run as when
    /// this process is root [default: nobody]; `root` is allowed, and logged.
    #[arg(long, env = "ABODE_TERRAFORM_USER", value_name = "USER")]
    pub terraform_user: Option<String>,
    /// Also show this path to every Terraform run: SRC, SRC:DST, SRC:ro or
    /// SRC:DST:ro, absolute paths (repeatable).
    #[arg(
        long = "terraform-mount",
        value_name = "SRC[:DST][:ro]",
        env = "ABODE_TERRAFORM_MOUNTS",
        value_delimiter = ','
    )]
    pub terraform_mounts: Vec<String>,
    /// Where workspace processes are on the network: `isolated`, a network
    /// namespace per workspace (its own loopback; out through slirp4netns;
    /// of this machine, only the access URL), which needs root; or `host`,
    /// this machine's network, shared by every workspace (warned at start)
    /// [default: isolated when root, host otherwise].
    #[arg(long, env = "ABODE_WORKSPACE_NETWORK", value_enum)]
    pub workspace_network: Option<NetworkArg>,
}

/// `--workspace-network`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NetworkArg {
    Isolated,
    Host,
}

impl TerraformFlags {
    /// The sandbox's settings, as `abode_terraform::machine` sets it up.
    pub fn sandbox(&self) -> abode_terraform::machine::SandboxSettings {
        abode_terraform::machine::SandboxSettings {
            off: self.terraform_sandbox == OnOff::Off,
            user: self.terraform_user.clone(),
            mounts: self.terraform_mounts.clone(),
            network: self.workspace_network.map(|network| match network {
                NetworkArg::Isolated => abode_terraform::machine::WorkspaceNetwork::Isolated,
                NetworkArg::Host => abode_terraform::machine::WorkspaceNetwork::Host,
            }),
            local_server: Default::default(),
        }
    }
}
