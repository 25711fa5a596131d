//! `abode quota show [USER]`: a person's budget (their groups' allowances)
//! and what each of their workspaces costs a day, so that a refusal by
//! quota can be understood and planned around.

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, visible};

#[derive(Debug, Subcommand)]
pub enum QuotaCommand {
    /// Show a person's budget and what uses it (a member: their own;
    /// owners and user-admins: anyone's).
    Show(ShowArgs),
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The person (default: yourself).
    pub user: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(command: QuotaCommand) -> anyhow::Result<u8> {
    let client = session_client()?;
    match command {
        QuotaCommand::Show(args) => {
            let quota = client
                .quota(args.user.as_deref())
                .with_context(|| match &args.user {
                    Some(user) => format!("cannot read the quota of {user:?}"),
                    None => "cannot read your quota".to_string(),
                })?;
            match args.output.output {
                OutputFormat::Json => output::print_json(&quota)?,
                OutputFormat::Text => {
                    println!(
                        "{}: {} of {} a day used, {} remain{}",
                        visible(&quota.user),
                        quota.spent,
                        quota.budget,
                        quota.remaining,
                        if quota.enforced {
                            ""
                        } else {
                            " (not enforced by this server)"
                        }
                    );
                    let mut rows: Vec<Vec<String>> = quota
                        .workspaces
                        .iter()
                        .map(|workspace| {
                            vec![
                                "workspace".to_string(),
                                workspace.name.clone(),
                                format!(
                                    "{}{}",
                                    workspace.daily_cost,
                                    if workspace.reserved {
                                        " (reserved)"
                                    } else {
                                        ""
                                    }
                                ),
                            ]
                        })
                        .collect();
                    rows.extend(quota.groups.iter().map(|group| {
                        vec![
                            "group".to_string(),
                            group.name.clone(),
                            format!("+{}", group.allowance),
                        ]
                    }));
                    output::print_table(&["KIND", "NAME", "PER DAY"], &rows, "Nothing.");
                }
            }
        }
    }
    Ok(EXIT_OK)
}
