//! The agents' `abode_script`s (issue 48, item 1): what an agent reports
//! of each run, and the scripts of a workspace with their latest run for
//! `abode scripts`.

use abode_contract::script::{run_report_problem, tail, ScriptDefinition, LOG_BYTES};
use abode_sdk::requests::AgentScriptReport;
use abode_sdk::WorkspaceScript;
use abode_store::{Agent, ScriptRunReport, Store};

use crate::ControlError;

/// The name the agent's `startup_script` has among its scripts.
pub const STARTUP_SCRIPT: &str = "startup_script";

/// Keeps what `agent` says of a run of one of its scripts (or of its
/// `startup_script`); a script it does not run is not found.
pub(crate) async fn record(
    store: &Store,
    agent: &Agent,
    report: AgentScriptReport,
) -> Result<(), ControlError> {
    if let Some(problem) = run_report_problem(&report.state, report.exit_status) {
        return Err(ControlError::BadRequest(problem));
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
    let run = ScriptRunReport {
        workspace_id: &agent.workspace_id,
        agent_name: &agent.name,
        display_name: &report.display_name,
        state: &report.state,
        exit_status: report.exit_status.filter(|_| report.state == "failed"),
        run: report.run,
        log: tail(&report.log, LOG_BYTES),
    };
    Ok(store.put_script_run(&run).await?)
}

fn definitions(json: Option<&str>) -> Vec<ScriptDefinition> {
    json.and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// The scripts of a workspace's agents (each agent's `startup_script`
/// first, once it ran), with their latest run.
pub(crate) async fn of_workspace(
    store: &Store,
    workspace_id: &str,
) -> Result<Vec<WorkspaceScript>, ControlError> {
    let runs = store.script_runs(workspace_id).await?;
    let mut listed: Vec<WorkspaceScript> = runs
        .iter()
        .filter(|run| run.display_name == STARTUP_SCRIPT)
        .map(|run| WorkspaceScript {
            agent: run.agent_name.clone(),
            display_name: STARTUP_SCRIPT.to_string(),
            runs_on: "start".to_string(),
            start_blocks_login: true,
            ..WorkspaceScript::default()
        })
        .collect();
    for (agent, json) in store.workspace_agent_scripts(workspace_id).await? {
        listed.extend(
            definitions(Some(&json))
                .into_iter()
                .map(|script| WorkspaceScript {
                    agent: agent.clone(),
                    runs_on: script.runs_on(),
                    display_name: script.display_name,
                    cron: script.cron,
                    start_blocks_login: script.start_blocks_login,
                    timeout_seconds: script.timeout_seconds,
                    ..WorkspaceScript::default()
                }),
        );
    }
    listed.sort_by(|a, b| a.agent.cmp(&b.agent));
    for script in &mut listed {
        let latest = runs
            .iter()
            .find(|run| run.agent_name == script.agent && run.display_name == script.display_name);
        if let Some(run) = latest {
            script.state = Some(run.state.clone());
            script.exit_status = run.exit_status;
            script.started_at = Some(crate::times::utc_text(run.started_at));
            script.ended_at = run.ended_at.map(crate::times::utc_text);
            script.runs = run.runs;
        }
    }
    Ok(listed)
}
