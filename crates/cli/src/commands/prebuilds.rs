//! `abode prebuilds`: the pools of prebuilt workspaces, and pausing their
//! reconciliation (owners).

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{session_client, OutputFormat, EXIT_OK};
use crate::output;

#[derive(Debug, Subcommand)]
pub enum PrebuildsCommand {
    /// Per preset: desired, running, ready, in progress, expired, failures,
    /// hard limit, paused.
    Status(StatusArgs),
    /// Owners: stop creating and deleting prebuilt workspaces (running builds
    /// finish).
    Pause,
    /// Owners: reconcile the pools again.
    Resume,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only this template's pools.
    #[arg(long)]
    pub template: Option<String>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

pub fn run(command: PrebuildsCommand) -> anyhow::Result<u8> {
    let client = session_client()?;
    match command {
        PrebuildsCommand::Status(args) => {
            let pools = client
                .prebuild_status(args.template.as_deref())
                .context("cannot read the prebuild pools")?;
            match args.output {
                OutputFormat::Json => output::print_json(&pools)?,
                OutputFormat::Text => {
                    let rows: Vec<Vec<String>> = pools
                        .iter()
                        .map(|pool| {
                            let mut state = Vec::new();
                            if pool.paused {
                                state.push("paused".to_string());
                            }
                            if pool.hard_limited {
                                state.push("hard-limited".to_string());
                            } else if pool.backing_off_until.is_some() {
                                state.push("backing off".to_string());
                            }
                            if pool.quota_limited {
                                state.push(match pool.estimated_cost {
                                    Some(cost) => {
                                        format!(
                                            "quota_limited (prebuilds budget, {cost} a day each)"
                                        )
                                    }
                                    None => "quota_limited (prebuilds budget)".to_string(),
                                });
                            }
                            if let Some(problem) = &pool.problem {
                                state.push(problem.clone());
                            }
                            vec![
                                pool.template.clone(),
                                pool.preset.clone(),
                                pool.desired.to_string(),
                                pool.running.to_string(),
                                pool.ready.to_string(),
                                pool.in_progress.to_string(),
                                pool.expired.to_string(),
                                pool.consecutive_failures.to_string(),
                                if state.is_empty() {
                                    "ok".to_string()
                                } else {
                                    state.join(", ")
                                },
                            ]
                        })
                        .collect();
                    output::print_table(
                        &[
                            "TEMPLATE",
                            "PRESET",
                            "DESIRED",
                            "RUNNING",
                            "READY",
                            "IN PROGRESS",
                            "EXPIRED",
                            "FAILURES",
                            "STATE",
                        ],
                        &rows,
                        "No preset keeps prebuilt workspaces.",
                    );
                }
            }
        }
        PrebuildsCommand::Pause => {
            client
                .set_prebuilds_paused(true)
                .context("cannot pause the prebuilds")?;
            println!("Prebuilds paused: no prebuilt workspace is created or deleted until `abode prebuilds resume`.");
        }
        PrebuildsCommand::Resume => {
            client
                .set_prebuilds_paused(false)
                .context("cannot resume the prebuilds")?;
            println!("Prebuilds resumed.");
        }
    }
    Ok(EXIT_OK)
}
