//! `abode provisioner list`: the provisioners of every server on the
//! database, with their tags, version, current job and last heartbeat
//! (docs/cli.md, docs/deployment.md); `abode provisioner keys`: the keys
//! external provisioner daemons authenticate with. `keys create` prints the
//! new key once, on stdout alone, so that it can go straight into a key
//! file or a secret store.

use anyhow::Context;
use clap::{Args, Subcommand};

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};
use crate::output::{self, or_dash, time, visible};

#[derive(Debug, Subcommand)]
pub enum ProvisionerCommand {
    /// List every server's provisioners (owners and template admins).
    List(OutputArgs),
    /// Run an external provisioner daemon: builds run here, with this
    /// machine's credentials, judged by the server (docs/deployment.md).
    Start(Box<crate::provisioner_daemon::StartArgs>),
    /// The keys external provisioner daemons authenticate with (owners).
    #[command(subcommand)]
    Keys(KeysCommand),
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a provisioner key and print it (once: it cannot be shown again).
    Create(CreateKeyArgs),
    /// List the provisioner keys (never the keys themselves).
    List(OutputArgs),
    /// Delete a provisioner key: daemons using it are refused at once.
    Delete(DeleteKeyArgs),
}

#[derive(Debug, Args)]
pub struct CreateKeyArgs {
    /// A name for the key, unique among provisioner keys (e.g. `aws-prod`).
    pub name: String,
    /// A tag the daemons using this key offer (`key=value`, repeatable):
    /// they take the jobs of template versions whose tags are all among
    /// them (docs/deployment.md).
    #[arg(long = "tag", value_name = "KEY=VALUE")]
    pub tags: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DeleteKeyArgs {
    /// The key's name.
    pub name: String,
}

pub fn run(command: ProvisionerCommand) -> anyhow::Result<u8> {
    match command {
        ProvisionerCommand::List(args) => list(args),
        ProvisionerCommand::Start(args) => {
            crate::provisioner_daemon::run(*args)?;
            Ok(EXIT_OK)
        }
        ProvisionerCommand::Keys(command) => keys(command),
    }
}

fn keys(command: KeysCommand) -> anyhow::Result<u8> {
    let client = session_client()?;
    match command {
        KeysCommand::Create(args) => {
            let created = client
                .create_provisioner_key(&args.name, &args.tags)
                .with_context(|| format!("cannot create provisioner key {:?}", args.name))?;
            // The note goes to stderr so that stdout is the key alone.
            eprintln!(
                "Created provisioner key {}{}. It is shown only now: store it safely, \
                 e.g. in a file only the daemon's user can read, and start a daemon with \
                 `abode provisioner start --url {} --key-file FILE`.",
                visible(&created.key.name),
                tags_note(&created.key.tags),
                visible(client.base_url()),
            );
            println!("{}", created.secret);
        }
        KeysCommand::List(args) => {
            let keys = client.provisioner_keys()?;
            match args.output {
                OutputFormat::Json => output::print_json(&keys)?,
                OutputFormat::Text => {
                    let rows: Vec<Vec<String>> = keys
                        .iter()
                        .map(|key| {
                            vec![
                                key.name.clone(),
                                tags_cell(&key.tags),
                                time(Some(&key.created_at)),
                                key.created_by.clone(),
                            ]
                        })
                        .collect();
                    output::print_table(
                        &["NAME", "TAGS", "CREATED", "CREATED BY"],
                        &rows,
                        "No provisioner keys (abode provisioner keys create NAME).",
                    );
                }
            }
        }
        KeysCommand::Delete(args) => {
            client
                .delete_provisioner_key(&args.name)
                .with_context(|| format!("cannot delete provisioner key {:?}", args.name))?;
            println!(
                "Deleted provisioner key {}: daemons using it are refused from now on.",
                visible(&args.name)
            );
        }
    }
    Ok(EXIT_OK)
}

fn tags_cell(tags: &[String]) -> String {
    if tags.is_empty() {
        "-".into()
    } else {
        tags.join(",")
    }
}

fn tags_note(tags: &[String]) -> String {
    if tags.is_empty() {
        " (no tags: its daemons take untagged templates' jobs)".into()
    } else {
        format!(" (tags {})", visible(&tags.join(",")))
    }
}

fn list(args: OutputArgs) -> anyhow::Result<u8> {
    let provisioners = session_client()?.provisioners()?;
    match args.output {
        OutputFormat::Json => output::print_json(&provisioners)?,
        OutputFormat::Text => {
            let rows: Vec<Vec<String>> = provisioners
                .iter()
                .map(|provisioner| {
                    let tags: Vec<String> = provisioner
                        .tags
                        .iter()
                        .map(|(key, value)| format!("{key}={value}"))
                        .collect();
                    let job = match &provisioner.current_job {
                        Some(job) if job.kind == "build" => format!(
                            "build #{} ({}) of {}",
                            job.build_number.unwrap_or_default(),
                            job.transition.as_deref().unwrap_or("?"),
                            job.workspace
                        ),
                        Some(job) => format!("{} of {}", job.kind, job.workspace),
                        None => "idle".into(),
                    };
                    vec![
                        provisioner.server.clone(),
                        visible(&or_dash(Some(&provisioner.host))),
                        provisioner.name.clone(),
                        provisioner.kind.clone(),
                        if tags.is_empty() {
                            "-".into()
                        } else {
                            tags.join(",")
                        },
                        provisioner.version.clone(),
                        visible(&job),
                        time(Some(&provisioner.last_heartbeat_at)),
                        provisioner.status.clone(),
                    ]
                })
                .collect();
            output::print_table(
                &[
                    "SERVER",
                    "HOST",
                    "NAME",
                    "KIND",
                    "TAGS",
                    "VERSION",
                    "CURRENT JOB",
                    "HEARTBEAT",
                    "STATUS",
                ],
                &rows,
                "No provisioner: every server runs with --provisioners 0.",
            );
        }
    }
    Ok(EXIT_OK)
}
