//! `abode connections log`: who connected to which workspace, how, from
//! where, for how long, with how many bytes, and how it ended.

use clap::{Args, Subcommand};

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, or_dash, time};

#[derive(Debug, Subcommand)]
pub enum ConnectionsCommand {
    /// The connection log, newest first: owners and auditors see everyone's
    /// connections, others those into their own workspaces.
    Log(LogArgs),
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only connections into this workspace (`name` or `owner/name`).
    #[arg(long, short = 'w')]
    pub workspace: Option<String>,
    /// Only connections by this user.
    #[arg(long)]
    pub user: Option<String>,
    /// Only connections opened at or after this time (RFC 3339, e.g. 2024-05-01T00:00:00Z).
    #[arg(long)]
    pub since: Option<String>,
    /// At most this many connections, newest first (default: all, read page by page).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: Option<u32>,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(command: ConnectionsCommand) -> anyhow::Result<u8> {
    let ConnectionsCommand::Log(args) = command;
    let mut filters: Vec<(&str, &str)> = Vec::new();
    for (name, value) in [
        ("workspace", &args.workspace),
        ("user", &args.user),
        ("since", &args.since),
    ] {
        if let Some(value) = value {
            filters.push((name, value));
        }
    }
    let entries = session_client()?.connections(&filters, args.limit.map(|n| n as usize))?;
    match args.output.output {
        OutputFormat::Json => output::print_json(&entries)?,
        OutputFormat::Text => {
            let rows: Vec<Vec<String>> = entries
                .iter()
                .map(|entry| {
                    let who = match &entry.token_name {
                        Some(token) => format!("{} (token {token})", entry.user),
                        None => entry.user.clone(),
                    };
                    let what = match (&entry.app, entry.port) {
                        (Some(app), _) => format!("{} {app}", entry.kind),
                        (None, Some(port)) => format!("{} {port}", entry.kind),
                        (None, None) => entry.kind.clone(),
                    };
                    vec![
                        time(Some(&entry.opened_at)),
                        who,
                        entry.workspace.clone(),
                        what,
                        or_dash(entry.client_ip.as_deref()),
                        format!(
                            "{}/{}",
                            entry.bytes_to_workspace, entry.bytes_from_workspace
                        ),
                        entry
                            .closed_at
                            .as_deref()
                            .map(|closed| time(Some(closed)))
                            .unwrap_or_else(|| "open".into()),
                        or_dash(entry.end_reason.as_deref()),
                    ]
                })
                .collect();
            output::print_table(
                &[
                    "OPENED",
                    "USER",
                    "WORKSPACE",
                    "KIND",
                    "FROM",
                    "BYTES IN/OUT",
                    "CLOSED",
                    "END",
                ],
                &rows,
                "No connections.",
            );
        }
    }
    Ok(EXIT_OK)
}
