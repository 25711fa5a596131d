//! `abode tokens`: long-lived API tokens for scripts and CI.
//!
//! `create` prints the token once, on stdout alone, so that it can be piped
//! into a secret store; this is the one place the CLI ever prints a token.
//! Everything else about a token (name, dates, scope) is safe to show.

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, time};

#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Create an API token and print it (once: it cannot be shown again).
    Create(CreateTokenArgs),
    /// List your API tokens (never the tokens themselves).
    List(OutputArgs),
    /// Revoke one of your API tokens: it stops working at once.
    Revoke(RevokeTokenArgs),
}

#[derive(Debug, Args)]
pub struct CreateTokenArgs {
    /// A name for the token, unique among your tokens (e.g. `ci`).
    #[arg(value_name = "NAME", required_unless_present = "name_flag")]
    pub name: Option<String>,
    /// The same name, as a flag.
    #[arg(
        long = "name",
        id = "name_flag",
        value_name = "NAME",
        conflicts_with = "name"
    )]
    pub name_flag: Option<String>,
    /// How long the token works: 90m, 24h, 30d, or seconds [default: the
    /// server's maximum, 365d unless configured].
    #[arg(long, value_parser = crate::duration::parse)]
    pub lifetime: Option<std::time::Duration>,
    /// What the token may do (repeatable): all [default], read,
    /// template:push, workspace:connect, workspace:build. It never allows
    /// more than you may do.
    #[arg(long = "scope", value_name = "SCOPE")]
    pub scopes: Vec<String>,
    /// A template `template:push` is limited to (repeatable).
    #[arg(long = "template", value_name = "T")]
    pub templates: Vec<String>,
    /// A workspace (`NAME` or `OWNER/NAME`) the `workspace:*` scopes are
    /// limited to (repeatable).
    #[arg(long = "workspace", value_name = "WS")]
    pub workspaces: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RevokeTokenArgs {
    /// The token's name.
    pub name: String,
}

pub fn run(command: TokensCommand) -> anyhow::Result<u8> {
    let client = session_client()?;
    match command {
        TokensCommand::Create(args) => {
            let name = args.name.or(args.name_flag).unwrap_or_default();
            let created = client
                .create_api_token(&abode_sdk::requests::NewApiToken {
                    name: name.clone(),
                    lifetime_seconds: args.lifetime.map(|lifetime| lifetime.as_secs()),
                    scopes: args.scopes,
                    templates: args.templates,
                    workspaces: args.workspaces,
                })
                .with_context(|| format!("cannot create API token {name:?}"))?;
            // The note goes to stderr so that stdout is the token alone.
            let lifetime = args
                .lifetime
                .map(|lifetime| format!(" (lifetime {})", crate::duration::format(lifetime)))
                .unwrap_or_default();
            eprintln!(
                "Created API token {}{lifetime} with scope {}, expires {}. It is shown only now: store it safely.",
                output::visible(&created.api_token.name),
                output::visible(&created.api_token.scope),
                time(created.api_token.expires_at.as_deref()),
            );
            println!("{}", created.token);
        }
        TokensCommand::List(args) => {
            let tokens = client.api_tokens()?;
            match args.output {
                OutputFormat::Json => output::print_json(&tokens)?,
                OutputFormat::Text => {
                    let rows: Vec<Vec<String>> = tokens
                        .iter()
                        .map(|token| {
                            vec![
                                token.name.clone(),
                                time(token.created_at.as_deref()),
                                time(token.last_used_at.as_deref()),
                                time(token.expires_at.as_deref()),
                                token.scope.clone(),
                            ]
                        })
                        .collect();
                    output::print_table(
                        &["NAME", "CREATED", "LAST USED", "EXPIRES", "SCOPE"],
                        &rows,
                        "No API tokens.",
                    );
                }
            }
        }
        TokensCommand::Revoke(args) => {
            let revoked = client
                .revoke_api_token(&args.name)
                .with_context(|| format!("cannot revoke API token {:?}", args.name))?;
            println!("Revoked API token {}", output::visible(&revoked.name));
        }
    }
    Ok(EXIT_OK)
}
