//! `abode_script`: a script one of the workspace's agents runs at start
//! (in parallel with the others; `start_blocks_login` ones before the agent
//! is ready), at stop (before the stop is applied, up to its timeout) or on
//! a six-field cron while the workspace is started, each with its own log.
//! Pure state: the platform reads it from the state after a start and hands
//! it to the agent. What it says is checked at plan time
//! (`abode_contract::script`); an `agent_id` that names no agent of the plan
//! is refused when the platform judges the build's plan.

use serde::{Deserialize, Serialize};
use tf_provider::schema::Block;
use tf_provider::value::Value;
use tf_provider::Diagnostics;

use crate::plumbing::ResourceType;
use crate::schema::{
    attribute_error, block, boolean, computed, known, number, optional, required, string,
};

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct ScriptState {
    id: Value<String>,
    agent_id: Value<String>,
    display_name: Value<String>,
    script: Value<String>,
    run_on_start: Value<bool>,
    run_on_stop: Value<bool>,
    cron: Value<String>,
    start_blocks_login: Value<bool>,
    timeout: Value<i64>,
    log_path: Value<String>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ScriptResource;

/// A flag as the agent reads it (null is false); None while unknown.
fn flag(value: &Value<bool>) -> Option<bool> {
    match value {
        Value::Value(set) => Some(*set),
        Value::Null => Some(false),
        Value::Unknown => None,
    }
}

impl ResourceType for ScriptResource {
    type State = ScriptState;

    fn block(&self) -> Block {
        block(
            "A script an agent runs at start, at stop or on a schedule, with its own log \
             (`abode scripts`). An agent runs any number of them.",
            vec![
                ("id", computed(string(), "Identifier of this script.")),
                (
                    "agent_id",
                    required(
                        string(),
                        "The `id` of the `abode_agent` that runs the script.",
                    ),
                ),
                (
                    "display_name",
                    required(
                        string(),
                        "Names the script in `abode scripts` and its log; one per agent \
                         (at most 64 printable characters).",
                    ),
                ),
                (
                    "script",
                    required(
                        string(),
                        "The script, run with `sh -c` in the agent's `dir` with its `env`.",
                    ),
                ),
                (
                    "run_on_start",
                    optional(
                        boolean(),
                        "Run when the agent starts, in parallel with the other start scripts \
                         and the startup script (default false).",
                    ),
                ),
                (
                    "run_on_stop",
                    optional(
                        boolean(),
                        "Run before a stop, restart or delete is applied, as the shutdown \
                         script is; the build waits for it up to its timeout (default false).",
                    ),
                ),
                (
                    "cron",
                    optional(
                        string(),
                        "Run on this schedule while the workspace is started: six fields, \
                         seconds first (`*/30 * * * * *`), read in UTC. A run still going is \
                         not started again.",
                    ),
                ),
                (
                    "start_blocks_login",
                    optional(
                        boolean(),
                        "With run_on_start: the agent is ready (and SSH and terminals \
                         connect) only once the script ended; its failure is the agent's \
                         start_error (default false).",
                    ),
                ),
                (
                    "timeout",
                    optional(
                        number(),
                        "Seconds a run may take before the agent kills it with what it \
                         started (more than 0; by default none, 300 for a stop script).",
                    ),
                ),
                (
                    "log_path",
                    optional(
                        string(),
                        "Where the script's output goes: an absolute path, or one relative to \
                         the agent's log directory (default \
                         abode-script-<owner>-<workspace>-<agent>-<display_name>.log there).",
                    ),
                ),
            ],
        )
    }

    fn id(state: &mut Self::State) -> &mut Value<String> {
        &mut state.id
    }

    fn check(&self, diags: &mut Diagnostics, state: &Self::State) {
        let cron = match &state.cron {
            Value::Value(cron) => Some(Some(cron.clone())),
            Value::Null => Some(None),
            Value::Unknown => None,
        };
        let flags = (
            flag(&state.run_on_start),
            flag(&state.run_on_stop),
            flag(&state.start_blocks_login),
        );
        let definition = abode_contract::script::ScriptDefinition {
            display_name: known(&state.display_name).cloned().unwrap_or_default(),
            script: String::new(),
            run_on_start: flags.0.unwrap_or(false),
            run_on_stop: flags.1.unwrap_or(false),
            cron: cron.clone().flatten(),
            start_blocks_login: flags.2.unwrap_or(false),
            timeout_seconds: known(&state.timeout).copied(),
            log_path: known(&state.log_path).cloned(),
        };
        let all_known =
            cron.is_some() && flags.0.is_some() && flags.1.is_some() && flags.2.is_some();
        for (attribute, problem) in definition.problems() {
            let judged = match attribute {
                "display_name" => known(&state.display_name).is_some(),
                "run_on_start" | "start_blocks_login" => all_known,
                _ => true,
            };
            if judged {
                attribute_error(diags, attribute, problem);
            }
        }
    }
}
