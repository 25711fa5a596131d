//! `abode_env`: a variable one of the workspace's agents adds to every
//! process it starts (its startup and claim scripts, SSH sessions,
//! terminals). Pure state: the platform reads it from the state after a
//! start and hands it to the agent. The name is checked at plan time
//! (`abode_contract::env`); two resources that set one name for one agent
//! are refused when the platform judges the build's plan. The value is
//! sensitive: Terraform hides it in plans and output.

use serde::{Deserialize, Serialize};
use tf_provider::schema::Block;
use tf_provider::value::Value;
use tf_provider::Diagnostics;

use crate::plumbing::ResourceType;
use crate::schema::{attribute_error, block, computed, known, required, sensitive, string};

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct EnvState {
    id: Value<String>,
    agent_id: Value<String>,
    name: Value<String>,
    value: Value<String>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct EnvResource;

impl ResourceType for EnvResource {
    type State = EnvState;

    fn block(&self) -> Block {
        block(
            "An environment variable an agent adds to every process it starts: its \
             scripts, SSH sessions and terminals. One name is set once per agent.",
            vec![
                ("id", computed(string(), "Identifier of this variable.")),
                (
                    "agent_id",
                    required(
                        string(),
                        "The `id` of the `abode_agent` whose processes get the variable.",
                    ),
                ),
                (
                    "name",
                    required(
                        string(),
                        "The variable's name: a letter or _, then letters, digits and _; \
                         not ABODE_AGENT_*.",
                    ),
                ),
                (
                    "value",
                    sensitive(required(
                        string(),
                        "The variable's value (sensitive: hidden in plans and output; it is \
                         in the Terraform state and handed only to the agent).",
                    )),
                ),
            ],
        )
    }

    fn id(state: &mut Self::State) -> &mut Value<String> {
        &mut state.id
    }

    fn check(&self, diags: &mut Diagnostics, state: &Self::State) {
        if let Some(name) = known(&state.name) {
            if let Some(problem) = abode_contract::env::name_problem(name) {
                attribute_error(diags, "name", format!("abode_env name: {problem}"));
            }
        }
    }
}
