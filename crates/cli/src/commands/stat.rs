//! `abode stat [WS]`: what a workspace uses, CPU, memory and its home's
//! disk (docs/cli.md). Inside a workspace (no `WS`) it measures the
//! workspace it runs in, whose agent named itself in `ABODE_AGENT_PID`;
//! with `WS` it asks that workspace's agent, through the server, over the
//! agent's SSH server (the `abode-stat` subsystem). The measuring is the
//! agent crate's (`abode_agent::stat`), the same on both sides.

use anyhow::Context;
use clap::Args;

use super::{OutputArgs, OutputFormat, EXIT_OK};

#[derive(Debug, Args)]
pub struct StatArgs {
    /// The workspace (`name`, or `owner/name`); leave it out inside a
    /// workspace to measure that one.
    pub workspace: Option<String>,
    /// Which agent, in a workspace with several (its name in `abode show`).
    #[arg(long, requires = "workspace")]
    pub agent: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: StatArgs) -> anyhow::Result<u8> {
    let stat = match &args.workspace {
        Some(workspace) => from_outside(workspace, args.agent.as_deref())?,
        None => inside()?,
    };
    match args.output.output {
        OutputFormat::Json => crate::output::print_json(&stat)?,
        OutputFormat::Text => print!("{}", abode_agent::stat::text(&stat)),
    }
    Ok(EXIT_OK)
}

/// The workspace this command runs in.
fn inside() -> anyhow::Result<abode_sdk::WorkspaceStat> {
    let pid = std::env::var(abode_contract::AGENT_PID)
        .ok()
        .and_then(|pid| pid.trim().parse::<i32>().ok())
        .filter(|pid| *pid > 0)
        .with_context(|| {
            format!(
                "not inside a workspace ({} is not set): name one, `abode stat WS`",
                abode_contract::AGENT_PID
            )
        })?;
    if !abode_agent::stat::running(pid) {
        anyhow::bail!(
            "the workspace's agent (pid {pid}, from {}) is not running here",
            abode_contract::AGENT_PID
        );
    }
    let home = abode_agent::stat::home(None);
    Ok(abode_agent::stat::measure(pid, home.as_deref()))
}

/// `workspace`, measured by its agent.
fn from_outside(workspace: &str, agent: Option<&str>) -> anyhow::Result<abode_sdk::WorkspaceStat> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let answer = runtime.block_on(async {
        let socket = super::ssh::connect(workspace, "ssh", None, agent).await?;
        super::ssh::subsystem_output(socket, abode_agent::stat::SUBSYSTEM).await
    });
    runtime.shutdown_background();
    let answer = answer.with_context(|| format!("cannot measure {workspace:?}"))?;
    serde_json::from_slice(&answer).with_context(|| {
        format!("the agent of {workspace:?} answered no measurement (is it older than this CLI?)")
    })
}
