//! The user-facing commands of `abode` that talk to a server: login, users,
//! templates, workspaces and builds.
//!
//! Each command is a few calls through `abode-client`; this module only parses
//! arguments, prints for humans (tables) or scripts (`--output json`) and maps
//! outcomes to exit codes (docs/cli.md). Commands that start a build follow its
//! log to the end, so a script's exit status is the build's.

mod audit;
mod auth;
mod build_timings;
mod builds;
mod config_ssh;
mod connections;
mod dotfiles;
mod external_auth;
mod groups;
mod guard;
mod notifications;
mod port_forward;
mod port_share;
mod prebuilds;
mod previews;
mod provisioners;
mod quota;
mod retained;
mod schedule;
mod scripts;
mod sharing;
mod ssh;
mod sso;
mod stat;
mod template_lifecycle;
mod template_permissions;
mod templates;
mod tokens;
mod volumes;
mod workspaces;

use std::process::ExitCode;

use abode_client::config::{self, Session};
use abode_client::{Client, ClientError};
use clap::{Args, Subcommand, ValueEnum};

/// Exit status of a command whose work succeeded.
pub const EXIT_OK: u8 = 0;
/// Exit status of any failure: bad input, refused request, failed build.
pub const EXIT_ERROR: u8 = crate::exit::FAILURE;
/// Exit status of a build held for confirmation by the plan guard.
pub const EXIT_AWAITING_CONFIRMATION: u8 = crate::exit::CONFIRMATION_REQUIRED;
/// Exit status of a build the plan guard blocked.
pub const EXIT_BLOCKED: u8 = crate::exit::BLOCKED;
/// Exit status of a build refused before apply by the quota.
pub const EXIT_QUOTA: u8 = crate::exit::QUOTA;

/// The commands that need (or create) a session with a server.
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Log in to a server and remember the session (or create its first user).
    Login(auth::LoginArgs),
    /// End the session on the server, then forget it here.
    Logout,
    /// Create, list and revoke long-lived API tokens.
    #[command(subcommand)]
    Tokens(tokens::TokensCommand),
    /// Manage user accounts.
    #[command(subcommand)]
    Users(auth::UsersCommand),
    /// Groups of people that templates' access lists name.
    #[command(subcommand)]
    Groups(groups::GroupsCommand),
    /// Budgets: what each workspace costs a day against one's groups' allowances.
    #[command(subcommand)]
    Quota(quota::QuotaCommand),
    /// Accounts (GitHub, GitLab, ...) your workspaces clone and push as.
    #[command(subcommand)]
    ExternalAuth(external_auth::ExternalAuthCommand),
    /// Push, list and activate templates.
    #[command(subcommand)]
    Templates(templates::TemplatesCommand),
    /// Create a workspace from a template and start it.
    Create(workspaces::CreateArgs),
    /// Start a stopped workspace.
    Start(workspaces::ChangeArgs),
    /// Stop a running workspace (persistent resources stay).
    Stop(workspaces::BuildArgs),
    /// Delete a workspace and everything its template created, but what it
    /// retains (`--retain`, or the template's `on_delete = "retain"`).
    Delete(workspaces::DeleteArgs),
    /// What workspace deletes retained: list, show, hand over, keep longer.
    #[command(subcommand)]
    Retained(retained::RetainedCommand),
    /// The server's volume directories that nothing knows any more.
    #[command(subcommand)]
    Volumes(volumes::VolumesCommand),
    /// Start a workspace on its template's active version.
    Update(workspaces::ChangeArgs),
    /// Rename a workspace: planned under the new name first, held like any
    /// build if that plan would replace or delete a protected resource.
    Rename(workspaces::RenameArgs),
    /// Stop a running workspace and start it again (one request; both
    /// builds guarded).
    Restart(workspaces::BuildArgs),
    /// Share a port of your workspace with people who are signed in, or
    /// with anyone (`list`, `remove`): served like an app (docs/apps.md).
    PortShare(port_share::PortShareArgs),
    /// Share a workspace with other people or groups (`add`, `list`,
    /// `remove`): `use` connects, `admin` also starts and stops it.
    #[command(subcommand)]
    Sharing(sharing::SharingCommand),
    /// List workspaces.
    List(workspaces::ListArgs),
    /// Show a workspace: build status, agent status and health.
    Show(workspaces::ShowArgs),
    /// List builds, read their logs, confirm or cancel them.
    #[command(subcommand)]
    Builds(builds::BuildsCommand),
    /// What a workspace keeps protected across template versions.
    #[command(subcommand)]
    Workspaces(workspaces::WorkspacesCommand),
    /// Read the audit log.
    Audit(audit::AuditArgs),
    /// The connection log: SSH sessions, port forwards, terminals and apps.
    #[command(subcommand)]
    Connections(connections::ConnectionsCommand),
    /// Your notifications: held, blocked, failed and expiring builds.
    #[command(subcommand)]
    Notifications(notifications::NotificationsCommand),
    /// Pools of prebuilt workspaces: their status; pause and resume them.
    #[command(subcommand)]
    Prebuilds(prebuilds::PrebuildsCommand),
    /// A workspace's autostart schedule, autostop ttl and deadline.
    #[command(subcommand)]
    Schedule(schedule::ScheduleCommand),
    /// The provisioners of every server: their heartbeat and current job.
    #[command(subcommand)]
    Provisioner(provisioners::ProvisionerCommand),
    /// Open a shell or run a command in a workspace over SSH (docs/ssh.md).
    Ssh(ssh::SshArgs),
    /// The scripts of a workspace's agents and their latest run, or the
    /// end of one's output (--log NAME).
    Scripts(scripts::ScriptsArgs),
    /// What a workspace uses: CPU, memory, its home's disk (inside a
    /// workspace, leave WS out).
    Stat(stat::StatArgs),
    /// Inside a workspace: clone (or pull) your dotfiles repository and run
    /// its installer, or link its dotfiles into HOME.
    Dotfiles(dotfiles::DotfilesArgs),
    /// Add a `Host abode.WS` entry per workspace to ~/.ssh/config.
    ConfigSsh(config_ssh::ConfigSshArgs),
    /// Forward local TCP ports to ports inside a workspace.
    PortForward(port_forward::PortForwardArgs),
}

/// How list and show commands print.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// Aligned tables and key: value lines for people.
    #[default]
    Text,
    /// JSON for scripts (shapes in docs/cli.md).
    Json,
}

/// The `--output` flag shared by list and show commands.
#[derive(Debug, Clone, Copy, Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// Runs a user command and turns its outcome into the documented exit status,
/// printing any error as one line on stderr.
pub fn run(command: UserCommand) -> ExitCode {
    let result = match command {
        UserCommand::Login(args) => auth::login(args),
        UserCommand::Logout => auth::logout(),
        UserCommand::Users(command) => auth::users(command),
        UserCommand::Groups(command) => groups::run(command),
        UserCommand::Quota(command) => quota::run(command),
        UserCommand::ExternalAuth(command) => external_auth::run(command),
        UserCommand::Retained(command) => retained::run(command),
        UserCommand::Volumes(command) => volumes::run(command),
        UserCommand::Templates(command) => templates::run(command),
        UserCommand::Create(args) => workspaces::create(args),
        UserCommand::Start(args) => {
            workspaces::transition(args.build, workspaces::Action::Start, &args.parameters)
        }
        UserCommand::Stop(args) => workspaces::transition(args, workspaces::Action::Stop, &[]),
        UserCommand::Delete(args) if args.orphan => workspaces::orphan(args.build),
        UserCommand::Delete(args) => workspaces::delete(args),
        UserCommand::Update(args) => {
            workspaces::transition(args.build, workspaces::Action::Update, &args.parameters)
        }
        UserCommand::Rename(args) => workspaces::rename(args),
        UserCommand::PortShare(args) => port_share::run(args),
        UserCommand::Restart(args) => workspaces::restart(args),
        UserCommand::Sharing(command) => sharing::run(command),
        UserCommand::List(args) => workspaces::list(args),
        UserCommand::Show(args) => workspaces::show(args),
        UserCommand::Builds(command) => builds::run(command),
        UserCommand::Workspaces(command) => workspaces::protections(command),
        UserCommand::Audit(args) => audit::run(args),
        UserCommand::Connections(command) => connections::run(command),
        UserCommand::Tokens(command) => tokens::run(command),
        UserCommand::Notifications(command) => notifications::run(command),
        UserCommand::Prebuilds(command) => prebuilds::run(command),
        UserCommand::Schedule(command) => schedule::run(command),
        UserCommand::Provisioner(command) => provisioners::run(command),
        UserCommand::Ssh(args) => ssh::run(args),
        UserCommand::Scripts(args) => scripts::run(args),
        UserCommand::Stat(args) => stat::run(args),
        UserCommand::Dotfiles(args) => dotfiles::run(args),
        UserCommand::ConfigSsh(args) => config_ssh::run(args),
        UserCommand::PortForward(args) => port_forward::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {}", crate::output::one_line(&err));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// A client for the stored (or environment-given) session.
fn session_client() -> anyhow::Result<Client> {
    let session = current_session()?.ok_or(ClientError::NotLoggedIn)?;
    Ok(Client::new(&session.url, Some(session.token)))
}

fn current_session() -> anyhow::Result<Option<Session>> {
    let dir = config::config_dir()?;
    let stored = config::load_session(&dir)?;
    Ok(config::effective_session(stored, |key| {
        std::env::var(key).ok()
    }))
}
