//! The agents' `abode_script`s (issue 48, item 1): what an agent reports
//! of each run, and the scripts of a workspace with their latest run and
//! output for `abode scripts`.

use abode_contract::script::ScriptDefinition;
use abode_sdk::requests::AgentScriptReport;
use abode_sdk::WorkspaceScript;
use abode_store::{Agent, ScriptRunReport, Store};

use crate::ControlError;

/// How much of a run's output the server keeps (its end).
pub const LOG_BYTES: usize = 64 * 1024;

/// The name the agent's `startup_script` has among its scripts.
pub const STARTUP_SCRIPT: &str = "startup_script";

const STATES: [&str; 5] = ["running", "succeeded", "failed", "timed_out", "not_run"];

/// Keeps what `agent` says of a run of one of its scripts (or of its
/// `startup_script`); a script it does not run is not found.
pub(crate) async fn record(
    store: &Store,
    agent: &Agent,
    report: AgentScriptReport,
) -> Result<(), ControlError> {
    if !STATES.contains(&report.state.as_str()) {
        return Err(ControlError::BadRequest(format!(
            "state `{}` is not one of {}",
            report.state,
            STATES.join(", ")
        )));
    }
    if let Some(status) = report.exit_status.filter(|s| !(0..=255).contains(s)) {
        return Err(ControlError::BadRequest(format!(
            "exit_status {status} is not an exit status (0 to 255)"
        )));
    }
    let known = report.display_name == STARTUP_SCRIPT
        || definitions(store.agent_scripts(&agent.id).await?.as_deref())
            .iter()
            .any(|script| script.display_name == report.display_name);
    if !known {
        return Err(ControlError::NotFound(format!(
            "agent {} has no script `{}`",
            agent.name, report.display_name
        )));
    }
    store
        .put_script_run(&ScriptRunReport {
            workspace_id: &agent.workspace_id,
            agent_name: &agent.name,
            display_name: &report.display_name,
            state: &report.state,
            exit_status: report.exit_status.filter(|_| report.state == "failed"),
            run: report.run,
            log: crate::agents::tail(&report.log, LOG_BYTES),
        })
        .await?;
    Ok(())
}

fn definitions(json: Option<&str>) -> Vec<ScriptDefinition> {
    json.and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// The scripts of a workspace's agents (each agent's `startup_script`
/// first, when it ran), with their latest run.
pub(crate) async fn of_workspace(
    store: &Store,
    workspace_id: &str,
) -> Result<Vec<WorkspaceScript>, ControlError> {
    let runs = store.script_runs(workspace_id).await?;
    let mut scripts = Vec::new();
    let agents = store.workspace_agent_scripts(workspace_id).await?;
    let mut names: Vec<&str> = runs.iter().map(|run| run.agent_name.as_str()).collect();
    names.extend(agents.iter().map(|(name, _)| name.as_str()));
    names.sort_unstable();
    names.dedup();
    for agent in names {
        let mut listed: Vec<WorkspaceScript> = Vec::new();
        if runs
            .iter()
            .any(|run| run.agent_name == agent && run.display_name == STARTUP_SCRIPT)
        {
            listed.push(WorkspaceScript {
                agent: agent.to_string(),
                display_name: STARTUP_SCRIPT.to_string(),
                runs_on: "start".to_string(),
                cron: None,
                start_blocks_login: true,
                timeout_seconds: None,
                state: None,
                exit_status: None,
                started_at: None,
                ended_at: None,
                runs: 0,
            });
        }
        let defined = agents
            .iter()
            .find(|(name, _)| name == agent)
            .map(|(_, json)| definitions(Some(json)))
            .unwrap_or_default();
        for script in defined {
            let mut on = Vec::new();
            if script.run_on_start {
                on.push("start");
            }
            if script.run_on_stop {
                on.push("stop");
            }
            if script.cron.is_some() {
                on.push("cron");
            }
            listed.push(WorkspaceScript {
                agent: agent.to_string(),
                display_name: script.display_name,
                runs_on: on.join("+"),
                cron: script.cron,
                start_blocks_login: script.start_blocks_login,
                timeout_seconds: script.timeout_seconds,
                state: None,
                exit_status: None,
                started_at: None,
                ended_at: None,
                runs: 0,
            });
        }
        for script in &mut listed {
            if let Some(run) = runs.iter().find(|run| {
                run.agent_name == script.agent && run.display_name == script.display_name
            }) {
                script.state = Some(run.state.clone());
                script.exit_status = run.exit_status;
                script.started_at = Some(crate::times::utc_text(run.started_at));
                script.ended_at = run.ended_at.map(crate::times::utc_text);
                script.runs = run.runs;
            }
        }
        scripts.extend(listed);
    }
    Ok(scripts)
}
