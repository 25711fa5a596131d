//! `abode external-auth list|link|unlink|access-token` (docs/external-auth.md):
//! the accounts a person links so that their workspaces clone and push as
//! them. `link` opens the provider's page (or prints it) and waits until the
//! server says the link is done; `access-token`, inside a workspace, asks
//! the workspace's agent for its owner's fresh token.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, visible};

/// How long `link` waits for the person to grant access.
const WAIT: Duration = Duration::from_secs(10 * 60);

#[derive(Debug, Subcommand)]
pub enum ExternalAuthCommand {
    /// The server's providers, and whether you linked each.
    List(ListArgs),
    /// Link your account of a provider: opens its page (or prints it) and
    /// waits until you granted access.
    Link(LinkArgs),
    /// Unlink your account of a provider; its tokens are revoked there.
    Unlink(UnlinkArgs),
    /// Inside a workspace: print its owner's fresh access token of a
    /// provider (asked of the workspace's agent).
    AccessToken(AccessTokenArgs),
}

#[derive(Debug, Args)]
pub struct AccessTokenArgs {
    /// The provider's id.
    pub id: String,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct LinkArgs {
    /// The provider's id (`abode external-auth list`).
    pub id: String,
    /// Print the address instead of opening a browser.
    #[arg(long)]
    pub no_browser: bool,
}

#[derive(Debug, Args)]
pub struct UnlinkArgs {
    pub id: String,
}

pub fn run(command: ExternalAuthCommand) -> anyhow::Result<u8> {
    if let ExternalAuthCommand::AccessToken(args) = &command {
        let socket = abode_agent::git_auth::socket_from_env().with_context(|| {
            format!(
                "abode external-auth access-token runs inside a workspace ({} is not set: the workspace's agent sets it)",
                abode_contract::AGENT_AUTH_SOCKET
            )
        })?;
        let token = abode_agent::git_auth::ask(
            &socket,
            &abode_sdk::requests::AgentExternalAuthToken {
                provider: Some(args.id.clone()),
                git_url: None,
                username_only: false,
            },
        )
        .map_err(anyhow::Error::msg)?;
        println!("{}", token.access_token);
        return Ok(EXIT_OK);
    }
    let client = session_client()?;
    match command {
        ExternalAuthCommand::List(args) => {
            let links = client
                .external_auth()
                .context("cannot list the external auth providers")?;
            match args.output.output {
                OutputFormat::Json => output::print_json(&links)?,
                OutputFormat::Text => {
                    let rows: Vec<Vec<String>> = links
                        .iter()
                        .map(|link| {
                            vec![
                                link.provider.clone(),
                                link.kind.clone(),
                                if link.linked { "linked" } else { "not linked" }.to_string(),
                                output::or_dash(link.linked_at.as_deref()),
                            ]
                        })
                        .collect();
                    output::print_table(
                        &["PROVIDER", "TYPE", "STATE", "LINKED AT"],
                        &rows,
                        "This server has no external auth providers (docs/external-auth.md).",
                    );
                }
            }
            Ok(EXIT_OK)
        }
        ExternalAuthCommand::Link(args) => {
            let before = linked_at(&client, &args.id)?;
            let start = client
                .start_external_auth(&args.id)
                .with_context(|| format!("cannot link your {} account", args.id))?;
            if let Some(code) = &start.user_code {
                // The device flow: the code is typed at the provider's page.
                eprintln!(
                    "Open this address in a browser, enter the code {} and grant access to link your {} account:\n  {}",
                    visible(code),
                    visible(&args.id),
                    visible(&start.url)
                );
                if !args.no_browser {
                    super::sso::open_browser(&start.url);
                }
            } else if args.no_browser || !super::sso::open_browser(&start.url) {
                eprintln!(
                    "Open this address in a browser and grant access to link your {} account:\n  {}",
                    visible(&args.id),
                    start.url
                );
            } else {
                eprintln!(
                    "Opened the page of {} in your browser: grant access there to link your account.",
                    visible(&args.id)
                );
            }
            let deadline = Instant::now() + WAIT;
            loop {
                let now = linked_at(&client, &args.id)?;
                if now.is_some() && now != before {
                    println!("Linked your {} account.", visible(&args.id));
                    return Ok(EXIT_OK);
                }
                if Instant::now() > deadline {
                    anyhow::bail!(
                        "your {} account was not linked within 10 minutes: run abode external-auth link {} again",
                        args.id,
                        args.id
                    );
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        }
        ExternalAuthCommand::Unlink(args) => {
            let unlinked = client
                .unlink_external_auth(&args.id)
                .with_context(|| format!("cannot unlink your {} account", args.id))?;
            match unlinked.revocation {
                None => println!(
                    "Unlinked your {} account; its tokens were revoked.",
                    visible(&args.id)
                ),
                Some(problem) => println!(
                    "Unlinked your {} account; the provider did not revoke its tokens ({}): revoke Abode's access there.",
                    visible(&args.id),
                    visible(&problem)
                ),
            }
            Ok(EXIT_OK)
        }
        // Answered above, without a session.
        ExternalAuthCommand::AccessToken(_) => Ok(EXIT_OK),
    }
}

/// When the caller linked provider `id`, if they did; an unknown provider
/// is an error.
fn linked_at(client: &abode_client::Client, id: &str) -> anyhow::Result<Option<String>> {
    let links = client
        .external_auth()
        .context("cannot list the external auth providers")?;
    let link = links
        .into_iter()
        .find(|link| link.provider == id)
        .ok_or_else(|| {
            anyhow::anyhow!("external auth provider {id:?} is not configured on this server (abode external-auth list)")
        })?;
    Ok(link.linked_at.filter(|_| link.linked))
}
