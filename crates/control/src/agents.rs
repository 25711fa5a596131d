//! Workspace agents: their tokens (valid only while the workspace is
//! started), heartbeats and lifecycle reports.

use abode_store::{Agent, NewAgent, StoreError, Transition, Workspace};

use crate::secrets;
use crate::Control;
use crate::ControlError;

impl Control {
    pub async fn authenticate_agent(&self, token: &str) -> Result<Agent, ControlError> {
        match self
            .inner
            .store
            .agent_by_token_hash(&secrets::token_hash(token))
            .await
        {
            Ok(agent) => {
                // An agent belongs to a started workspace: once a stop (or a
                // delete) has succeeded, its token reads nothing more.
                let now = self
                    .inner
                    .store
                    .latest_succeeded_build(&agent.workspace_id)
                    .await?;
                match now {
                    Some(build) if build.transition == Transition::Start => Ok(agent),
                    _ => Err(ControlError::Unauthorized(
                        "this agent's workspace is no longer started; its token is no longer valid"
                            .into(),
                    )),
                }
            }
            Err(StoreError::NotFound(_)) => {
                Err(ControlError::Unauthorized("unknown agent token".into()))
            }
            Err(other) => Err(other.into()),
        }
    }

    /// A heartbeat, answered with the agent's workspace as it is now: a
    /// prebuilt workspace's agent learns from it that it was claimed (its
    /// owner and name changed) without being restarted.
    pub async fn agent_heartbeat(&self, agent: &Agent) -> Result<Workspace, ControlError> {
        self.inner.store.agent_heartbeat(&agent.id, None).await?;
        self.agent_workspace(agent).await
    }

    /// What the agent runs when its prebuilt workspace is claimed.
    pub async fn agent_claim_script(&self, agent: &Agent) -> Result<Option<String>, ControlError> {
        Ok(self.inner.store.agent_claim_script(&agent.id).await?)
    }

    /// A new lifecycle state: `starting`, `ready`, or `start_error` with the
    /// startup script's exit status (if it ran at all). Counts as a heartbeat.
    pub async fn agent_lifecycle(
        &self,
        agent: &Agent,
        state: &str,
        exit_status: Option<i64>,
    ) -> Result<(), ControlError> {
        let lifecycle: abode_store::AgentLifecycle =
            state
                .parse()
                .map_err(|error: abode_store::UnknownAgentLifecycle| {
                    ControlError::BadRequest(error.to_string())
                })?;
        let exit_status = match lifecycle {
            abode_store::AgentLifecycle::StartError => exit_status,
            _ => None,
        };
        // What a shell reports: 0-255 (128 + n for a signal).
        if let Some(status) = exit_status.filter(|status| !(0..=255).contains(status)) {
            return Err(ControlError::BadRequest(format!(
                "exit_status {status} is not an exit status (0 to 255)"
            )));
        }
        Ok(self
            .inner
            .store
            .agent_lifecycle(&agent.id, lifecycle, exit_status)
            .await?)
    }

    /// The workspace an agent belongs to.
    pub async fn agent_workspace(&self, agent: &Agent) -> Result<Workspace, ControlError> {
        Ok(self
            .inner
            .store
            .workspace_by_id(&agent.workspace_id)
            .await?)
    }
}
/// The `abode_agent` resources of a state, with the hash of each token and
/// what the agent runs at start (`startup_script`, `dir`, `env`). The token
/// itself goes no further than this function.
pub(crate) fn agents_in_state(state: &[u8]) -> Result<Vec<NewAgent>, serde_json::Error> {
    let value = serde_json::from_slice::<serde_json::Value>(state)?;
    let mut agents = Vec::new();
    for agent in crate::state::managed_instances(&value) {
        if agent.resource_type != "abode_agent" {
            continue;
        }
        let instance = agent.object;
        let Some(token) = instance
            .pointer("/attributes/token")
            .and_then(|t| t.as_str())
        else {
            continue;
        };
        if token.is_empty() {
            continue;
        }
        let name = if agent.name.is_empty() {
            "agent"
        } else {
            agent.name
        };
        let full_name = match agent.module {
            Some(module) => format!("{module}.{name}{}", agent.index_suffix()),
            None => format!("{name}{}", agent.index_suffix()),
        };
        let text = |attribute: &str| {
            instance
                .pointer(&format!("/attributes/{attribute}"))
                .and_then(|v| v.as_str())
                .filter(|v| !v.is_empty())
                .map(String::from)
        };
        // Only string values: the agent adds them to the script's
        // environment as they are.
        let env: serde_json::Map<String, serde_json::Value> = instance
            .pointer("/attributes/env")
            .and_then(|e| e.as_object())
            .map(|env| {
                env.iter()
                    .filter(|(_, value)| value.is_string())
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect()
            })
            .unwrap_or_default();
        agents.push(NewAgent {
            name: full_name,
            token_hash: secrets::token_hash(token),
            startup_script: text("startup_script"),
            claim_script: text("claim_script"),
            dir: text("dir"),
            env: serde_json::Value::Object(env).to_string(),
        });
    }
    Ok(agents)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn agent_tokens_are_read_from_state_and_only_their_hash_kept() {
        let state = br#"{"version":4,"resources":[
          {"mode":"managed","type":"abode_agent","name":"main","instances":[{"attributes":{"token":"secret-1"}}]},
          {"module":"module.m","mode":"managed","type":"abode_agent","name":"extra","instances":[{"index_key":0,"attributes":{"token":"secret-2"}}]},
          {"mode":"managed","type":"terraform_data","name":"x","instances":[{"attributes":{"token":"not-an-agent"}}]},
          {"mode":"data","type":"abode_agent","name":"d","instances":[{"attributes":{"token":"data"}}]}
        ]}"#;
        let agents = agents_in_state(state).unwrap();
        let found: Vec<(&str, String)> = agents
            .iter()
            .map(|a| (a.name.as_str(), a.token_hash.clone()))
            .collect();
        assert_eq!(
            found,
            vec![
                ("main", secrets::token_hash("secret-1")),
                ("module.m.extra[0]", secrets::token_hash("secret-2")),
            ]
        );
        assert!(agents_in_state(b"not json").is_err());
        assert_eq!(
            (
                agents[1].startup_script.as_deref(),
                agents[1].dir.as_deref(),
                agents[1].env.as_str()
            ),
            (None, None, "{}"),
            "an agent without a startup script"
        );
    }

    #[test]
    fn agent_startup_script_dir_and_env_are_read_from_state() {
        let state = br#"{"version":4,"resources":[
          {"mode":"managed","type":"abode_agent","name":"main","instances":[{"attributes":{
            "token":"secret-1","startup_script":"echo hi > marker","dir":"/home/dev",
            "env":{"GREETING":"hello","ODD":7}}}]},
          {"mode":"managed","type":"abode_agent","name":"empty","instances":[{"attributes":{
            "token":"secret-2","startup_script":"","dir":null,"env":null}}]}
        ]}"#;
        let agents = agents_in_state(state).unwrap();
        let found: Vec<(&str, Option<&str>, Option<&str>, &str)> = agents
            .iter()
            .map(|a| {
                (
                    a.name.as_str(),
                    a.startup_script.as_deref(),
                    a.dir.as_deref(),
                    a.env.as_str(),
                )
            })
            .collect();
        assert_eq!(
            found,
            vec![
                (
                    "main",
                    Some("echo hi > marker"),
                    Some("/home/dev"),
                    r#"{"GREETING":"hello"}"#
                ),
                ("empty", None, None, "{}"),
            ]
        );
    }
}
