//! `abode volumes orphans`: directories of the server's volumes dir that no
//! workspace's state and no retained record knows, so that an operator
//! finds what the platform forgot (a `terraform state rm`, a restore from an
//! old backup) before it fills the disk or is deleted by hand.

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, visible};

#[derive(Debug, Subcommand)]
pub enum VolumesCommand {
    /// Volume directories nothing knows (owners).
    Orphans(OrphansArgs),
}

#[derive(Debug, Args)]
pub struct OrphansArgs {
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(command: VolumesCommand) -> anyhow::Result<u8> {
    let client = session_client()?;
    match command {
        VolumesCommand::Orphans(args) => {
            let orphans = client
                .orphan_volumes()
                .context("cannot list orphaned volumes")?;
            match args.output.output {
                OutputFormat::Json => output::print_json(&orphans)?,
                OutputFormat::Text => {
                    let rows: Vec<Vec<String>> = orphans
                        .iter()
                        .map(|orphan| {
                            vec![
                                visible(&orphan.name),
                                orphan.size_bytes.to_string(),
                                orphan.modified_at.clone(),
                            ]
                        })
                        .collect();
                    output::print_table(
                        &["NAME", "BYTES", "MODIFIED"],
                        &rows,
                        "No orphaned volumes.",
                    );
                }
            }
        }
    }
    Ok(EXIT_OK)
}
