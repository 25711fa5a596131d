//! `abode port-share`: open a port of one's workspace to other people
//! without a template change (docs/apps.md), within the template's maximum
//! (`abode templates port-share NAME --max LEVEL`).

use clap::{Args, Subcommand, ValueEnum};

use abode_sdk::apps::AppShare;

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, visible};

/// Who a shared port opens to.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ShareLevel {
    Authenticated,
    Public,
}

/// A template's maximum.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum MaxLevel {
    Owner,
    Authenticated,
    Public,
}

impl From<ShareLevel> for AppShare {
    fn from(level: ShareLevel) -> AppShare {
        match level {
            ShareLevel::Authenticated => AppShare::Authenticated,
            ShareLevel::Public => AppShare::Public,
        }
    }
}

impl From<MaxLevel> for AppShare {
    fn from(level: MaxLevel) -> AppShare {
        match level {
            MaxLevel::Owner => AppShare::Owner,
            MaxLevel::Authenticated => AppShare::Authenticated,
            MaxLevel::Public => AppShare::Public,
        }
    }
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct PortShareArgs {
    #[command(subcommand)]
    pub command: Option<PortShareCommand>,
    /// The workspace (`name`, or `owner/name`).
    #[arg(required = true)]
    pub workspace: Option<String>,
    /// The port inside the workspace.
    #[arg(required = true)]
    pub port: Option<u16>,
    /// Who may open it: authenticated (anyone signed in) or public.
    #[arg(long, value_enum)]
    pub share: Option<ShareLevel>,
    /// The agent whose port it is, when the workspace has several.
    #[arg(long)]
    pub agent: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum PortShareCommand {
    /// The workspace's shared ports.
    List(ListArgs),
    /// Make a shared port its owner's alone again.
    Remove(RemoveArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    pub workspace: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct RemoveArgs {
    pub workspace: String,
    pub port: u16,
    #[arg(long)]
    pub agent: Option<String>,
}

/// `abode templates port-share NAME [--max LEVEL]`.
#[derive(Debug, Args)]
pub struct TemplateMaxArgs {
    /// The template's name.
    pub name: String,
    /// Set how far its workspaces may share ports (owner: not at all).
    #[arg(long, value_enum)]
    pub max: Option<MaxLevel>,
}

pub fn run(args: PortShareArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    match args.command {
        Some(PortShareCommand::List(list)) => {
            let shares = client.port_shares(&list.workspace)?;
            match list.output.output {
                OutputFormat::Json => output::print_json(&shares)?,
                OutputFormat::Text => {
                    let rows: Vec<Vec<String>> = shares
                        .iter()
                        .map(|shared| {
                            vec![
                                shared.port.to_string(),
                                shared.agent.clone(),
                                shared.share.as_str().to_string(),
                                shared.url.clone().unwrap_or_else(|| "-".into()),
                            ]
                        })
                        .collect();
                    output::print_table(
                        &["PORT", "AGENT", "SHARED WITH", "URL"],
                        &rows,
                        "No shared ports.",
                    );
                }
            }
        }
        Some(PortShareCommand::Remove(remove)) => {
            client.unshare_port(&remove.workspace, remove.port, remove.agent.as_deref())?;
            println!(
                "Port {} of {} is its owner's alone again",
                remove.port,
                visible(&remove.workspace)
            );
        }
        None => {
            let (Some(workspace), Some(port)) = (args.workspace, args.port) else {
                anyhow::bail!("abode port-share WS PORT --share authenticated|public");
            };
            let Some(share) = args.share else {
                anyhow::bail!(
                    "say who may open port {port}: --share authenticated or --share public"
                );
            };
            let shared =
                client.share_port(&workspace, port, share.into(), args.agent.as_deref())?;
            let place = shared.and_then(|shared| shared.url).unwrap_or_else(|| {
                "(the server serves no apps: --wildcard-access-url or --allow-path-apps)".into()
            });
            println!(
                "Port {port} of {} is open to {}: {}",
                visible(&workspace),
                AppShare::from(share).as_str(),
                visible(&place)
            );
        }
    }
    Ok(EXIT_OK)
}

pub fn template_max(args: TemplateMaxArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let answer = client.template_port_share(&args.name, args.max.map(AppShare::from))?;
    println!(
        "Workspaces of {} may share ports up to: {}",
        visible(&args.name),
        answer.max.as_str()
    );
    Ok(EXIT_OK)
}
