//! `abode scripts WS [--log NAME] [--agent A]`: the scripts of a
//! workspace's agents (`abode_script`s and each `startup_script`) with
//! their latest run, or the end of one's output (docs/cli.md).

use anyhow::Context;
use clap::Args;

use super::{session_client, OutputArgs, OutputFormat, EXIT_OK};

#[derive(Debug, Args)]
pub struct ScriptsArgs {
    /// The workspace (`name`, or `owner/name`).
    pub workspace: String,
    /// Print the end of this script's latest output instead (its display
    /// name, or `startup_script`).
    #[arg(long, value_name = "NAME")]
    pub log: Option<String>,
    /// Which agent, in a workspace with several (its name in `abode show`).
    #[arg(long)]
    pub agent: Option<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: ScriptsArgs) -> anyhow::Result<u8> {
    let client = session_client()?;
    let scripts = client
        .workspace_scripts(&args.workspace)
        .with_context(|| format!("cannot list the scripts of {:?}", args.workspace))?;
    if let Some(name) = &args.log {
        let agents: Vec<&str> = {
            let mut agents: Vec<&str> = scripts
                .iter()
                .filter(|script| &script.display_name == name)
                .map(|script| script.agent.as_str())
                .filter(|agent| args.agent.as_deref().is_none_or(|wanted| wanted == *agent))
                .collect();
            agents.dedup();
            agents
        };
        let agent = match agents.as_slice() {
            [agent] => *agent,
            [] => anyhow::bail!(
                "workspace {:?} has no script {name:?}{}: `abode scripts {}` lists them",
                args.workspace,
                args.agent
                    .as_deref()
                    .map(|agent| format!(" on agent {agent:?}"))
                    .unwrap_or_default(),
                args.workspace
            ),
            _ => anyhow::bail!(
                "several agents of {:?} have a script {name:?}: name one with --agent",
                args.workspace
            ),
        };
        let log = client
            .workspace_script_log(&args.workspace, agent, name)
            .with_context(|| format!("cannot read the output of script {name:?}"))?;
        match args.output.output {
            OutputFormat::Json => crate::output::print_json(&log)?,
            OutputFormat::Text => print!("{}", log.log),
        }
        return Ok(EXIT_OK);
    }
    let scripts: Vec<_> = scripts
        .into_iter()
        .filter(|script| {
            args.agent
                .as_deref()
                .is_none_or(|agent| agent == script.agent)
        })
        .collect();
    match args.output.output {
        OutputFormat::Json => crate::output::print_json(&scripts)?,
        OutputFormat::Text => {
            let rows: Vec<Vec<String>> = scripts
                .iter()
                .map(|script| {
                    let state = match (script.state.as_deref(), script.exit_status) {
                        (Some("failed"), Some(code)) => format!("failed (exit {code})"),
                        (Some(state), _) => state.to_string(),
                        (None, _) => "not run yet".to_string(),
                    };
                    vec![
                        script.agent.clone(),
                        script.display_name.clone(),
                        match &script.cron {
                            Some(cron) => format!("{} ({cron})", script.runs_on),
                            None => script.runs_on.clone(),
                        },
                        if script.start_blocks_login {
                            "yes"
                        } else {
                            "no"
                        }
                        .to_string(),
                        state,
                        script.runs.to_string(),
                        script.started_at.clone().unwrap_or_default(),
                        script.ended_at.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            crate::output::print_table(
                &[
                    "AGENT",
                    "SCRIPT",
                    "RUNS ON",
                    "BLOCKS LOGIN",
                    "LAST RUN",
                    "RUNS",
                    "STARTED",
                    "ENDED",
                ],
                &rows,
                "no scripts",
            );
        }
    }
    Ok(EXIT_OK)
}
