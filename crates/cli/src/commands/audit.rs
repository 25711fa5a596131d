//! `abode audit`: who did what, to what, when, with which outcome.

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, or_dash, time};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    #[command(subcommand)]
    pub command: Option<AuditCommand>,
    /// Only events about this workspace (`name` or `owner/name`).
    #[arg(long, short = 'w')]
    pub workspace: Option<String>,
    /// Only events about this target, whatever its type (`alice`, `alice/dev`, a template).
    #[arg(long)]
    pub target: Option<String>,
    /// Only events by this user.
    #[arg(long)]
    pub actor: Option<String>,
    /// Only events of this action (e.g. `build.start`, `login`).
    #[arg(long)]
    pub action: Option<String>,
    /// Only events at or after this time (RFC 3339, e.g. 2024-05-01T00:00:00Z).
    #[arg(long)]
    pub since: Option<String>,
    /// Only events before this time (RFC 3339).
    #[arg(long)]
    pub until: Option<String>,
    /// At most this many events, newest first (default: all, read page by page).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: Option<u32>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Write the whole audit log (owners and auditors), oldest first, to
    /// standard output as it arrives: JSON lines or CSV.
    Export(ExportArgs),
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Events at or after this time (RFC 3339, e.g. 2024-05-01T00:00:00Z).
    #[arg(long)]
    pub since: String,
    /// Events before this time (RFC 3339).
    #[arg(long)]
    pub until: Option<String>,
    #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
    pub format: ExportFormat,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    /// One JSON object per line, as `abode audit --output json` shows each event.
    Jsonl,
    /// RFC 4180, with a header row.
    Csv,
}

pub fn run(args: AuditArgs) -> anyhow::Result<u8> {
    if let Some(AuditCommand::Export(export)) = args.command {
        return run_export(export);
    }
    let mut filters: Vec<(&str, &str)> = Vec::new();
    for (name, value) in [
        ("workspace", &args.workspace),
        ("target", &args.target),
        ("actor", &args.actor),
        ("action", &args.action),
        ("since", &args.since),
        ("until", &args.until),
    ] {
        if let Some(value) = value {
            filters.push((name, value));
        }
    }
    let events = session_client()?.audit(&filters, args.limit.map(|n| n as usize))?;
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

fn run_export(args: ExportArgs) -> anyhow::Result<u8> {
    let format = match args.format {
        ExportFormat::Jsonl => "jsonl",
        ExportFormat::Csv => "csv",
    };
    let mut filters = vec![("since", args.since.as_str()), ("format", format)];
    if let Some(until) = &args.until {
        filters.push(("until", until));
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    session_client()?.export_audit(&filters, &mut out)?;
    std::io::Write::flush(&mut out).context("cannot write the export to standard output")?;
    Ok(EXIT_OK)
}
