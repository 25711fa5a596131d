//! `abode tokens`: long-lived API tokens for scripts and CI.
//!
//! `create` prints the token once, on stdout alone, so that it can be piped
//! into a secret store; this is the one place the CLI ever prints a token.
//! Everything else about a token (name, dates) is safe to show.

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
    #[arg(long)]
    pub name: String,
    /// How long the token works: 90m, 24h, 30d, or seconds [default: the
    /// server's maximum, 365d unless configured].
    #[arg(long, value_parser = crate::duration::parse)]
    pub lifetime: Option<std::time::Duration>,
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
            let created = client
                .create_api_token(&args.name, args.lifetime.map(|lifetime| lifetime.as_secs()))
                .with_context(|| format!("cannot create API token {:?}", args.name))?;
            // The note goes to stderr so that stdout is the token alone.
            let lifetime = args
                .lifetime
                .map(|lifetime| format!(" (lifetime {})", crate::duration::format(lifetime)))
                .unwrap_or_default();
            eprintln!(
                "Created API token {}{lifetime}, expires {}. It is shown only now: store it safely.",
                output::visible(&created.api_token.name),
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
                            ]
                        })
                        .collect();
                    output::print_table(
                        &["NAME", "CREATED", "LAST USED", "EXPIRES"],
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
