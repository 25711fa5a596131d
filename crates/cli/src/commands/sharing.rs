//! `abode sharing add|list|remove WS`: who else may use a workspace
//! (issue 49, docs/cli.md). `use` connects (SSH, port forwards, the
//! terminal, `owner` apps); `admin` also starts, stops, restarts and
//! updates it. Its owner, owners and template admins manage the list.

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};

use abode_sdk::requests::WorkspaceShareChange;
use abode_sdk::WorkspaceSharing;

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, visible};

#[derive(Debug, Subcommand)]
pub enum SharingCommand {
    /// Share a workspace with a user or a group (again: a new role).
    Add(AddArgs),
    /// A workspace's share list.
    List(ListArgs),
    /// Stop sharing a workspace with a user or a group (their open
    /// connections close at once).
    Remove(RemoveArgs),
}

/// Whom an entry names: one user or one group.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct Whom {
    /// A user, by username.
    #[arg(long)]
    pub user: Option<String>,
    /// A group, by name (`Everyone`: every person).
    #[arg(long)]
    pub group: Option<String>,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// The workspace (`name`, or `owner/name`).
    pub workspace: String,
    #[command(flatten)]
    pub whom: Whom,
    /// `use` (connect) or `admin` (also start, stop, restart, update).
    #[arg(long, value_enum)]
    pub role: ShareRole,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The workspace (`name`, or `owner/name`).
    pub workspace: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The workspace (`name`, or `owner/name`).
    pub workspace: String,
    #[command(flatten)]
    pub whom: Whom,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShareRole {
    Use,
    Admin,
}

pub fn run(command: SharingCommand) -> anyhow::Result<u8> {
    let client = session_client()?;
    let (workspace, change, output) = match command {
        SharingCommand::List(args) => {
            let sharing = client.workspace_sharing(&args.workspace).with_context(|| {
                format!("cannot read the sharing of workspace {:?}", args.workspace)
            })?;
            print(&sharing, args.output)?;
            return Ok(EXIT_OK);
        }
        SharingCommand::Add(args) => {
            let role = match args.role {
                ShareRole::Use => "use",
                ShareRole::Admin => "admin",
            };
            (args.workspace, change(args.whom, role), args.output)
        }
        SharingCommand::Remove(args) => (args.workspace, change(args.whom, "none"), args.output),
    };
    let sharing = client
        .set_workspace_share(&workspace, &change)
        .with_context(|| format!("sharing of workspace {workspace:?} not changed"))?;
    print(&sharing, output)?;
    Ok(EXIT_OK)
}

fn change(whom: Whom, role: &str) -> WorkspaceShareChange {
    WorkspaceShareChange {
        user: whom.user,
        group: whom.group,
        role: role.to_string(),
    }
}

fn print(sharing: &WorkspaceSharing, output: OutputArgs) -> anyhow::Result<()> {
    if output.output == OutputFormat::Json {
        return output::print_json(sharing);
    }
    println!("Sharing of workspace {}", visible(&sharing.workspace));
    let rows: Vec<Vec<String>> = sharing
        .shares
        .iter()
        .map(|entry| vec![entry.kind.clone(), visible(&entry.name), entry.role.clone()])
        .collect();
    output::print_table(
        &["KIND", "NAME", "ROLE"],
        &rows,
        "Shared with nobody (abode sharing add WS --user NAME --role use).",
    );
    Ok(())
}
