//! `abode provisioner list`: the provisioners of every server on the
//! database, with their tags, version, current job and last heartbeat
//! (docs/cli.md, docs/deployment.md).

use clap::Subcommand;

use super::output::{self, time, visible};
use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};

#[derive(Debug, Subcommand)]
pub enum ProvisionerCommand {
    /// List every server's provisioners (owners and template admins).
    List(OutputArgs),
    /// Run an external provisioner daemon: builds run here, with this
    /// machine's credentials, judged by the server (docs/deployment.md).
    Start(crate::provisioner_daemon::StartArgs),
}

pub fn run(command: ProvisionerCommand) -> anyhow::Result<u8> {
    match command {
        ProvisionerCommand::List(args) => list(args),
        ProvisionerCommand::Start(args) => {
            crate::provisioner_daemon::run(args)?;
            Ok(EXIT_OK)
        }
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
