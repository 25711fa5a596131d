//! `abode audit`: who did what, to what, when, with which outcome.

use clap::Args;

use super::output::{self, or_dash, time};
use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only events about this workspace (`name` or `owner/name`).
    #[arg(long, short = 'w')]
    pub workspace: Option<String>,
    /// At most this many events, newest first (server default 100, at most 1000).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: Option<u32>,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: AuditArgs) -> anyhow::Result<u8> {
    let events = session_client()?.audit(args.workspace.as_deref(), args.limit)?;
    match args.output.output {
        OutputFormat::Json => output::print_json(&events)?,
        OutputFormat::Text => {
            let rows: Vec<Vec<String>> = events
                .iter()
                .map(|event| {
                    vec![
                        time(event.time.as_deref()),
                        event.actor.clone().unwrap_or_else(|| "(server)".into()),
                        event.action.clone(),
                        or_dash(event.target.as_deref()),
                        or_dash(event.outcome.as_deref()),
                        or_dash(event.details.as_deref()),
                    ]
                })
                .collect();
            output::print_table(
                &["TIME", "ACTOR", "ACTION", "TARGET", "OUTCOME", "DETAILS"],
                &rows,
                "No audit events.",
            );
        }
    }
    Ok(EXIT_OK)
}
