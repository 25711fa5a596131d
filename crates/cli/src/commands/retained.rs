//! `abode retained`: what workspace deletes retained (issue 32), so that
//! someone who deleted the wrong workspace finds their volume, hands it to
//! whoever needs it, keeps it longer, or adopts it into a new workspace
//! (`abode create --adopt ID`).

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, visible};

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
    /// Write a retained volume to a tar file with a manifest of each file's
    /// SHA-256 (the volume must be on the server's machine).
    Export(ExportArgs),
    /// Check an exported volume file against its manifest (no server).
    Verify(VerifyArgs),
    /// Destroy a retained resource: its plan is held until you confirm it
    /// with `--digest` (exit 3 while held). A snapshot's archive is
    /// removed at once.
    Destroy(DestroyArgs),
    /// Bring a snapshot's files back into a stopped workspace's volume.
    Restore(RestoreArgs),
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// A retained record of kind `snapshot`.
    pub id: String,
    /// The workspace (`name` or `owner/name`); it must be stopped.
    #[arg(long)]
    pub to: String,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub struct DestroyArgs {
    pub id: String,
    /// Confirm the held destroy whose plan has this digest.
    #[arg(long)]
    pub digest: Option<String>,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    pub id: String,
    /// The file to write (refused if it exists).
    #[arg(long)]
    pub to: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// A file written by `abode retained export`.
    pub file: std::path::PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
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
    // A file is checked without a server.
    let command = match command {
        RetainedCommand::Verify(args) => return verify(args),
        other => other,
    };
    let client = session_client()?;
    match command {
        RetainedCommand::Verify(args) => return verify(args),
        RetainedCommand::Export(args) => export(&client, args)?,
        RetainedCommand::Destroy(args) => return destroy(&client, args),
        RetainedCommand::Restore(args) => {
            let restored = client
                .restore_retained(&args.id, &args.to)
                .with_context(|| format!("snapshot {:?} was not restored", args.id))?;
            match args.output.output {
                OutputFormat::Json => output::print_json(&restored)?,
                OutputFormat::Text => eprintln!(
                    "Restored snapshot {} into {} (volume {}): {} files, {} bytes",
                    visible(&restored.id),
                    visible(&restored.workspace),
                    visible(&restored.volume),
                    restored.files,
                    restored.bytes
                ),
            }
        }
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
                                r.kind.clone(),
                                r.address.clone(),
                                format!("{}/{}", r.owner, r.workspace),
                                r.status.clone(),
                                r.retained_at.clone(),
                                r.expires_at.clone().unwrap_or_else(|| "never".into()),
                            ]
                        })
                        .collect();
                    output::print_table(
                        &[
                            "ID", "KIND", "ADDRESS", "FROM", "STATUS", "RETAINED", "EXPIRES",
                        ],
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

/// Writes beside the target and renames when whole: a cut export never
/// looks like a finished one.
fn export(client: &abode_client::Client, args: ExportArgs) -> anyhow::Result<()> {
    if args.to.exists() {
        anyhow::bail!("{} exists; choose another file", args.to.display());
    }
    let mut partial = args.to.clone().into_os_string();
    partial.push(".partial");
    let partial = std::path::PathBuf::from(partial);
    let mut file = std::fs::File::create(&partial)
        .with_context(|| format!("cannot create {}", partial.display()))?;
    let written = client
        .export_retained(&args.id, &mut file)
        .and_then(|bytes| {
            file.sync_all().map(|()| bytes).map_err(|error| {
                abode_client::ClientError::BadResponse {
                    what: "volume export".into(),
                    reason: error.to_string(),
                }
            })
        });
    let bytes = match written {
        Ok(bytes) => bytes,
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            return Err(error)
                .with_context(|| format!("retained resource {:?} was not exported", args.id));
        }
    };
    std::fs::rename(&partial, &args.to)
        .with_context(|| format!("cannot move the export to {}", args.to.display()))?;
    eprintln!(
        "Exported retained resource {} to {} ({bytes} bytes); check it with: abode retained verify {}",
        visible(&args.id),
        args.to.display(),
        args.to.display()
    );
    Ok(())
}

/// Queues (or confirms) the destroy and follows its build until it ends or
/// is held: 0 destroyed, 3 held (with the confirm command), 4 blocked,
/// 1 failed.
fn destroy(client: &abode_client::Client, args: DestroyArgs) -> anyhow::Result<u8> {
    let mut record = client
        .destroy_retained(&args.id, args.digest.as_deref())
        .with_context(|| format!("retained resource {:?} was not destroyed", args.id))?;
    if record.kind == "snapshot" {
        eprintln!(
            "Destroyed snapshot {} (the archive of {})",
            visible(&record.id),
            visible(&record.address)
        );
        return Ok(EXIT_OK);
    }
    loop {
        let status = record
            .destroy_build
            .as_ref()
            .map(|build| build.status.clone())
            .unwrap_or_default();
        if !matches!(status.as_str(), "pending" | "running") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        record = client
            .retained_resource(&args.id)
            .with_context(|| format!("cannot follow the destroy of {:?}", args.id))?;
    }
    let Some(build) = &record.destroy_build else {
        anyhow::bail!("retained resource {:?} has no destroy build", args.id);
    };
    match build.status.as_str() {
        "succeeded" => {
            eprintln!(
                "Destroyed retained resource {} ({})",
                visible(&record.id),
                visible(&record.address)
            );
            Ok(EXIT_OK)
        }
        "awaiting_confirmation" => {
            eprintln!(
                "The destroy of retained resource {} ({}) waits for your confirmation: it destroys the resource and its data.",
                visible(&record.id),
                visible(&record.address)
            );
            if let Some(changes) = build
                .guard
                .as_ref()
                .and_then(|report| report.get("protected_changes"))
                .and_then(serde_json::Value::as_array)
            {
                // The guard's reasons speak of a workspace delete; this
                // one destroys only what the record keeps.
                for change in changes {
                    eprintln!(
                        "  - {} will be destroyed, with its data",
                        visible(change["address"].as_str().unwrap_or_default())
                    );
                }
            }
            eprintln!(
                "To destroy exactly this plan: abode retained destroy {} --digest {}",
                record.id,
                build.plan_digest.as_deref().unwrap_or_default()
            );
            Ok(super::EXIT_AWAITING_CONFIRMATION)
        }
        other => {
            let blocked = build
                .guard
                .as_ref()
                .and_then(|report| report.get("decision"))
                .and_then(serde_json::Value::as_str)
                == Some("block");
            eprintln!(
                "The destroy of retained resource {} {}: {}",
                visible(&record.id),
                visible(other),
                visible(build.error.as_deref().unwrap_or("see the server's log"))
            );
            Ok(if blocked {
                super::EXIT_BLOCKED
            } else {
                super::EXIT_ERROR
            })
        }
    }
}

/// Exit 0 when every file matches its manifest, 1 with one line per
/// problem otherwise.
fn verify(args: VerifyArgs) -> anyhow::Result<u8> {
    let file = std::fs::File::open(&args.file)
        .with_context(|| format!("cannot open {}", args.file.display()))?;
    let report = abode_volume_archive::verify(std::io::BufReader::new(file))
        .with_context(|| format!("{} is not a volume export", args.file.display()))?;
    match args.output.output {
        OutputFormat::Json => {
            let problems: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
            output::print_json(&serde_json::json!({
                "ok": report.ok(),
                "volume": report.meta.volume,
                "retained_id": report.meta.retained_id,
                "files": report.files,
                "bytes": report.bytes,
                "problems": problems,
            }))?;
        }
        OutputFormat::Text => {
            for problem in &report.problems {
                println!("{}", visible(&problem.to_string()));
            }
            if report.ok() {
                eprintln!(
                    "{}: {} files, {} bytes of volume {} match the manifest",
                    args.file.display(),
                    report.files,
                    report.bytes,
                    visible(&report.meta.volume)
                );
            }
        }
    }
    if report.ok() {
        Ok(EXIT_OK)
    } else {
        anyhow::bail!(
            "{}: {} problem(s) against its manifest",
            args.file.display(),
            report.problems.len()
        )
    }
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
                vec!["kind".to_string(), record.kind.clone()],
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
