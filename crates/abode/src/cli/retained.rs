//! `abode retained`: what workspace deletes retained (issue 32), so that
//! someone who deleted the wrong workspace finds their volume, hands it to
//! whoever needs it, keeps it longer, or adopts it into a new workspace
//! (`abode create --adopt ID`).

use anyhow::Context;
use clap::{Args, Subcommand};

use super::output::{self, visible};
use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};

#[derive(Debug, Subcommand)]
pub enum RetainedCommand {
    /// Your retained resources (open ones; `--closed` adds adopted,
    /// destroyed and void ones; `--all`: everyone's).
    List(ListArgs),
    /// One retained resource: where it came from, its attributes, its expiry.
    Show(ShowArgs),
    /// Hand a retained resource to another person (owners).
    Assign(AssignArgs),
    /// Keep a retained resource longer (`30d`, `12h`, `90m`).
    Extend(ExtendArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Everyone's (owners and template-admins).
    #[arg(long, short = 'a')]
    pub all: bool,
    /// Closed records too (adopted, destroyed, void).
    #[arg(long)]
    pub closed: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    pub id: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct AssignArgs {
    pub id: String,
    /// The new owner's username.
    pub user: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ExtendArgs {
    pub id: String,
    /// How much longer: `30d`, `12h`, `90m`.
    pub by: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(command: RetainedCommand) -> anyhow::Result<u8> {
    let client = session_client()?;
    match command {
        RetainedCommand::List(args) => {
            let records = client
                .retained_resources(args.all, args.closed, None)
                .context("cannot list retained resources")?;
            match args.output.output {
                OutputFormat::Json => output::print_json(&records)?,
                OutputFormat::Text => {
                    let rows: Vec<Vec<String>> = records
                        .iter()
                        .map(|r| {
                            vec![
                                r.id.clone(),
                                r.address.clone(),
                                format!("{}/{}", r.owner, r.workspace),
                                r.status.clone(),
                                r.retained_at.clone(),
                                r.expires_at.clone().unwrap_or_else(|| "never".into()),
                            ]
                        })
                        .collect();
                    output::print_table(
                        &["ID", "ADDRESS", "FROM", "STATUS", "RETAINED", "EXPIRES"],
                        &rows,
                        "No retained resources.",
                    );
                }
            }
        }
        RetainedCommand::Show(args) => {
            let record = client
                .retained_resource(&args.id)
                .with_context(|| format!("cannot read retained resource {:?}", args.id))?;
            print_record(&record, &args.output)?;
        }
        RetainedCommand::Assign(args) => {
            let record = client
                .assign_retained(&args.id, &args.user)
                .with_context(|| format!("retained resource {:?} was not handed over", args.id))?;
            if matches!(args.output.output, OutputFormat::Text) {
                eprintln!(
                    "Retained resource {} ({}) now belongs to {}",
                    visible(&record.id),
                    visible(&record.address),
                    visible(&record.owner)
                );
            }
            print_record(&record, &args.output)?;
        }
        RetainedCommand::Extend(args) => {
            let record = client
                .extend_retained(&args.id, &args.by)
                .with_context(|| format!("retained resource {:?} was not extended", args.id))?;
            print_record(&record, &args.output)?;
        }
    }
    Ok(EXIT_OK)
}

fn print_record(
    record: &abode_sdk::RetainedResource,
    output_args: &OutputArgs,
) -> anyhow::Result<()> {
    match output_args.output {
        OutputFormat::Json => output::print_json(record)?,
        OutputFormat::Text => {
            let rows = vec![
                vec!["id".to_string(), record.id.clone()],
                vec!["status".to_string(), record.status.clone()],
                vec!["address".to_string(), record.address.clone()],
                vec!["type".to_string(), record.resource_type.clone()],
                vec!["provider".to_string(), record.provider.clone()],
                vec!["import id".to_string(), record.import_id.clone()],
                vec!["owner".to_string(), record.owner.clone()],
                vec!["workspace".to_string(), record.workspace.clone()],
                vec![
                    "template".to_string(),
                    format!("{} version {}", record.template, record.template_version),
                ],
                vec![
                    "retained".to_string(),
                    format!("{} by {}", record.retained_at, record.retained_by),
                ],
                vec![
                    "expires".to_string(),
                    match &record.expires_at {
                        Some(at) => format!("{at} (then {})", record.expire_action),
                        None => "never".to_string(),
                    },
                ],
                vec!["attributes".to_string(), record.attributes.to_string()],
            ];
            output::print_table(&["FIELD", "VALUE"], &rows, "");
        }
    }
    Ok(())
}
