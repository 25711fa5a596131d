//! Workspace agents: their tokens (valid only while the workspace is
//! started), heartbeats and lifecycle reports.

use abode_contract::apps::{AppDefinition, AppHealth};
use abode_contract::script::ScriptDefinition;
use abode_store::{Agent, NewAgent, StoreError, Transition, Workspace, WorkspaceApp};

use crate::secrets;
use crate::ControlError;

/// The agents as they call the server: their tokens, heartbeats,
/// lifecycle, apps and app health. Reached as `Control::agents()`.
#[derive(Clone)]
pub struct Agents {
    store: abode_store::Store,
    clock: abode_clock::Clock,
    /// Tells an owner of a nearly full home volume (`disk.rs`).
    notifications: crate::Notifications,
    /// Where an agent's stages of its build are observed.
    metrics: abode_metrics::Metrics,
}

/// How much of a shutdown script's output the server keeps (its end).
pub const SHUTDOWN_OUTPUT_BYTES: usize = 4096;

impl Agents {
    pub fn new(
        store: abode_store::Store,
        clock: abode_clock::Clock,
        notifications: crate::Notifications,
        metrics: abode_metrics::Metrics,
    ) -> Agents {
        Agents {
            store,
            clock,
            notifications,
            metrics,
        }
    }

    pub async fn authenticate_agent(&self, token: &str) -> Result<Agent, ControlError> {
        match self
            .store
            .agent_by_token_hash(&secrets::token_hash(token))
            .await
        {
            Ok(agent) => {
                // An agent belongs to a started workspace: once a stop (or a
                // delete) has succeeded, its token reads nothing more.
                let now = self
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
    /// What it says of its home volume is kept, and its owner told of a
    /// threshold reached (`disk.rs`).
    pub async fn agent_heartbeat(
        &self,
        agent: &Agent,
        report: abode_sdk::requests::AgentHeartbeatReport,
    ) -> Result<Workspace, ControlError> {
        self.store.agent_heartbeat(&agent.id, None).await?;
        if let Some(disk) = report.home_disk {
            crate::disk::record(&self.store, &self.clock, &self.notifications, agent, disk).await?;
        }
        self.agent_workspace(agent).await
    }

    /// The shutdown script a stop, restart or delete waits for, while it
    /// has not ended (the heartbeat's answer tells the agent).
    pub async fn agent_shutdown_asked(
        &self,
        agent: &Agent,
    ) -> Result<Option<abode_sdk::AgentShutdown>, ControlError> {
        Ok(self
            .store
            .pending_agent_shutdown(&agent.id)
            .await?
            .map(|row| abode_sdk::AgentShutdown {
                build: row.build_id,
                script: row.script,
                timeout_seconds: u64::try_from(row.timeout_seconds).unwrap_or(0),
            }))
    }

    /// How the agent's shutdown script for a build ended. A build that
    /// stopped waiting (or never asked) is not found.
    pub async fn agent_shutdown_report(
        &self,
        agent: &Agent,
        report: abode_sdk::requests::AgentShutdownReport,
    ) -> Result<(), ControlError> {
        const OUTCOMES: [&str; 4] = ["succeeded", "failed", "timed_out", "not_run"];
        if !OUTCOMES.contains(&report.outcome.as_str()) {
            return Err(ControlError::BadRequest(format!(
                "outcome `{}` is not one of succeeded, failed, timed_out, not_run",
                report.outcome
            )));
        }
        if let Some(status) = report
            .exit_status
            .filter(|status| !(0..=255).contains(status))
        {
            return Err(ControlError::BadRequest(format!(
                "exit_status {status} is not an exit status (0 to 255)"
            )));
        }
        let output = abode_contract::script::tail(&report.output, SHUTDOWN_OUTPUT_BYTES);
        let ended = self
            .store
            .end_agent_shutdown(
                &report.build,
                &agent.id,
                &report.outcome,
                report.exit_status.filter(|_| report.outcome == "failed"),
                Some(output),
            )
            .await?;
        if !ended {
            return Err(ControlError::NotFound(format!(
                "build {} waits for no shutdown script of agent {}",
                report.build, agent.name
            )));
        }
        Ok(())
    }

    /// The agent's `abode_script`s.
    pub async fn agent_scripts(
        &self,
        agent: &Agent,
    ) -> Result<Vec<ScriptDefinition>, ControlError> {
        Ok(self
            .store
            .agent_scripts(&agent.id)
            .await?
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or_default())
    }

    /// What the agent watches: its `metadata` blocks and resource monitors.
    pub async fn agent_watch(
        &self,
        agent: &Agent,
    ) -> Result<abode_contract::watch::AgentWatch, ControlError> {
        Ok(self
            .store
            .agent_watch(&agent.id)
            .await?
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or_default())
    }

    /// What each agent of the workspace watches, by agent name.
    pub async fn workspace_watches(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<(String, abode_contract::watch::AgentWatch)>, ControlError> {
        Ok(self
            .store
            .workspace_agent_watches(workspace_id)
            .await?
            .into_iter()
            .filter_map(|(name, json)| Some((name, serde_json::from_str(&json).ok()?)))
            .collect())
    }

    /// What the agent runs when its prebuilt workspace is claimed.
    pub async fn agent_claim_script(&self, agent: &Agent) -> Result<Option<String>, ControlError> {
        Ok(self.store.agent_claim_script(&agent.id).await?)
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
        self.store
            .agent_lifecycle(&agent.id, lifecycle, exit_status)
            .await?;
        // Its build's timings: connected, scripts, ready.
        let ended = self.store.agent_lifecycle_timings(&agent.id, lifecycle);
        for (stage, seconds) in ended.await? {
            self.metrics.build_stage(&stage, seconds);
        }
        Ok(())
    }

    /// The workspace an agent belongs to.
    /// The apps `agent` serves.
    pub async fn agent_apps(&self, agent: &Agent) -> Result<Vec<WorkspaceApp>, ControlError> {
        Ok(self
            .store
            .apps_of_workspace(&agent.workspace_id)
            .await?
            .into_iter()
            .filter(|app| app.agent_id == agent.id)
            .collect())
    }

    /// What `agent`'s check of its app `slug` found. An app it does not
    /// serve is not found.
    pub async fn agent_app_health(
        &self,
        agent: &Agent,
        slug: &str,
        health: AppHealth,
    ) -> Result<(), ControlError> {
        let served = self
            .agent_apps(agent)
            .await?
            .into_iter()
            .any(|app| app.definition.slug == slug && app.definition.healthcheck.is_some());
        if !served {
            return Err(ControlError::NotFound(format!(
                "agent {} has no checked app `{slug}`",
                agent.name
            )));
        }
        if self.store.set_app_health(&agent.id, slug, health).await? {
            tracing::info!(agent = %agent.name, workspace = %agent.workspace_id, app = slug,
                health = health.as_str(), "app health changed");
        }
        Ok(())
    }

    /// What `agent` says of a run of one of its scripts (`scripts.rs`).
    pub async fn agent_script_run(
        &self,
        agent: &Agent,
        report: abode_sdk::requests::AgentScriptReport,
    ) -> Result<(), ControlError> {
        crate::scripts::record(&self.store, agent, report).await
    }

    /// What `agent`'s scan of the workspace's home found: kept as the
    /// workspace's last report of unsaved work.
    pub async fn agent_unsaved(
        &self,
        agent: &Agent,
        report: abode_sdk::requests::AgentUnsaved,
    ) -> Result<(), ControlError> {
        crate::unsaved::record(&self.store, &agent.workspace_id, report).await
    }

    /// Whether someone asked for a fresh report of unsaved work that has
    /// not come yet (the heartbeat's answer tells the agent).
    pub async fn unsaved_scan_requested(&self, agent: &Agent) -> Result<bool, ControlError> {
        Ok(self
            .store
            .unsaved_scan_requested(&agent.workspace_id)
            .await?)
    }

    pub async fn agent_workspace(&self, agent: &Agent) -> Result<Workspace, ControlError> {
        Ok(self.store.workspace_by_id(&agent.workspace_id).await?)
    }
}
/// The agents of a state, and why any of its apps or variables was left out.
pub struct AgentsInState {
    pub agents: Vec<NewAgent>,
    /// One line per `abode_app` or `abode_env` that could not be kept (for
    /// the build's log).
    pub app_problems: Vec<String>,
}

/// One `abode_env` of a state.
struct EnvVariable {
    agent_id: String,
    name: String,
    value: String,
}

/// The `abode_env`s of a state: each name once per agent (the first one
/// kept; a plan that sets one twice is refused before it is applied, so a
/// second one is only a state made otherwise), never a name the agent keeps
/// for itself. No value is ever in a problem's line.
fn envs_in_state(value: &serde_json::Value, problems: &mut Vec<String>) -> Vec<EnvVariable> {
    let mut kept: Vec<(EnvVariable, String)> = Vec::new();
    for instance in crate::state::managed_instances(value) {
        if instance.resource_type != "abode_env" {
            continue;
        }
        let address = instance.address();
        let text = |attribute: &str| {
            instance
                .object
                .pointer(&format!("/attributes/{attribute}"))
                .and_then(serde_json::Value::as_str)
        };
        let (Some(agent_id), Some(name)) = (text("agent_id"), text("name")) else {
            problems.push(format!("{address}: no agent_id or name"));
            continue;
        };
        if let Some(problem) = abode_contract::env::name_problem(name) {
            problems.push(format!("{address}: {problem}"));
            continue;
        }
        if let Some((_, first)) = kept
            .iter()
            .find(|(kept, _)| kept.agent_id == agent_id && kept.name == name)
        {
            problems.push(format!(
                "{address}: {first} already sets `{name}` for this agent; left out"
            ));
            continue;
        }
        kept.push((
            EnvVariable {
                agent_id: agent_id.to_string(),
                name: name.to_string(),
                value: text("value").unwrap_or_default().to_string(),
            },
            address,
        ));
    }
    kept.into_iter().map(|(variable, _)| variable).collect()
}

/// The `abode_script`s of a state, by the `id` of the agent that runs
/// them: each checked with the provider's rules, one display name per agent.
fn scripts_in_state(
    value: &serde_json::Value,
    problems: &mut Vec<String>,
) -> Vec<(String, ScriptDefinition)> {
    per_agent(
        value,
        "abode_script",
        problems,
        ScriptDefinition::from_attributes,
        |script| &script.display_name,
        "another script of the same agent is named",
    )
}

/// The `abode_app`s of a state, by the `id` of the agent that serves them:
/// each checked with the provider's rules, and one slug per agent.
fn apps_in_state(
    value: &serde_json::Value,
    problems: &mut Vec<String>,
) -> Vec<(String, AppDefinition)> {
    per_agent(
        value,
        "abode_app",
        problems,
        AppDefinition::from_attributes,
        |app| &app.slug,
        "another app of the same agent has the slug",
    )
}

/// The resources of `resource_type` in a state, read by `parse`, by the
/// `id` of the agent they name: one per `name` and agent (a second is left
/// out with a problem that says `clash`).
fn per_agent<T, E: std::fmt::Display>(
    value: &serde_json::Value,
    resource_type: &str,
    problems: &mut Vec<String>,
    parse: impl Fn(&serde_json::Value) -> Result<T, E>,
    name: impl Fn(&T) -> &str,
    clash: &str,
) -> Vec<(String, T)> {
    let mut kept: Vec<(String, T)> = Vec::new();
    for instance in crate::state::managed_instances(value) {
        if instance.resource_type != resource_type {
            continue;
        }
        let address = instance.address();
        let Some(attributes) = instance.object.get("attributes") else {
            continue;
        };
        let Some(agent_id) = attributes
            .get("agent_id")
            .and_then(serde_json::Value::as_str)
        else {
            problems.push(format!("{address}: no agent_id"));
            continue;
        };
        match parse(attributes) {
            Ok(item)
                if kept
                    .iter()
                    .any(|(agent, other)| agent == agent_id && name(other) == name(&item)) =>
            {
                problems.push(format!("{address}: {clash} `{}`; left out", name(&item)));
            }
            Ok(item) => kept.push((agent_id.to_string(), item)),
            Err(error) => problems.push(format!("{address}: {error}")),
        }
    }
    kept
}

/// The `abode_agent` resources of a state, with the hash of each token and
/// what the agent runs at start (`startup_script`, `dir`, `env`), and the
/// apps each serves. The token itself goes no further than this function.
pub fn agents_in_state(state: &[u8]) -> Result<AgentsInState, serde_json::Error> {
    let value = serde_json::from_slice::<serde_json::Value>(state)?;
    let mut app_problems = Vec::new();
    let mut apps = apps_in_state(&value, &mut app_problems);
    let mut envs = envs_in_state(&value, &mut app_problems);
    let mut scripts = scripts_in_state(&value, &mut app_problems);
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
        let mut env: serde_json::Map<String, serde_json::Value> = instance
            .pointer("/attributes/env")
            .and_then(|e| e.as_object())
            .map(|env| {
                env.iter()
                    .filter(|(_, value)| value.is_string())
                    .map(|(name, value)| (name.clone(), value.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let agent_id = text("id");
        // Its `abode_env`s, over what its own `env` says.
        let (own, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut envs)
            .into_iter()
            .partition(|variable| Some(&variable.agent_id) == agent_id.as_ref());
        envs = rest;
        for variable in own {
            env.insert(variable.name, serde_json::Value::String(variable.value));
        }
        let (served, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut apps)
            .into_iter()
            .partition(|(serving, _)| Some(serving) == agent_id.as_ref());
        apps = rest;
        let (runs, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut scripts)
            .into_iter()
            .partition(|(running, _)| Some(running) == agent_id.as_ref());
        scripts = rest;
        agents.push(NewAgent {
            name: full_name,
            token_hash: secrets::token_hash(token),
            startup_script: text("startup_script"),
            claim_script: text("claim_script"),
            dir: text("dir"),
            env: serde_json::Value::Object(env).to_string(),
            apps: served.into_iter().map(|(_, app)| app).collect(),
            settings: abode_store::AgentSettings {
                shutdown_script: text("shutdown_script"),
                shutdown_timeout_seconds: instance
                    .pointer("/attributes/shutdown_timeout")
                    .and_then(serde_json::Value::as_i64)
                    .map(|seconds| seconds.max(0)),
                disk_warning_percents: match instance
                    .pointer("/attributes/disk_warning_percents")
                    .and_then(serde_json::Value::as_array)
                {
                    Some(percents) => percents
                        .iter()
                        .filter_map(serde_json::Value::as_i64)
                        .collect(),
                    None => abode_contract::disk::DEFAULT_WARNING_PERCENTS.to_vec(),
                },
                scripts: runs.into_iter().map(|(_, script)| script).collect(),
                watch: instance
                    .get("attributes")
                    .map(abode_contract::watch::AgentWatch::from_attributes)
                    .unwrap_or_default(),
            },
        });
    }
    for variable in envs {
        app_problems.push(format!(
            "abode_env `{}`: no abode_agent of this workspace has the id {}",
            variable.name, variable.agent_id
        ));
    }
    for (agent_id, script) in scripts {
        app_problems.push(format!(
            "script `{}`: no abode_agent of this workspace has the id {agent_id}",
            script.display_name
        ));
    }
    for (agent_id, app) in apps {
        app_problems.push(format!(
            "app `{}`: no abode_agent of this workspace has the id {agent_id}",
            app.slug
        ));
    }
    Ok(AgentsInState {
        agents,
        app_problems,
    })
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
        let agents = agents_in_state(state).unwrap().agents;
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
    fn abode_envs_join_their_agents_env_once_per_name() {
        let state = br#"{"version":4,"resources":[
          {"mode":"managed","type":"abode_agent","name":"main","instances":[{"attributes":{
            "id":"a1","token":"secret-1","env":{"EDITOR":"nano","KEEP":"yes"}}}]},
          {"mode":"managed","type":"abode_agent","name":"other","instances":[{"attributes":{
            "id":"a2","token":"secret-2"}}]},
          {"mode":"managed","type":"abode_env","name":"editor","instances":[{"attributes":{
            "agent_id":"a1","name":"EDITOR","value":"vim"}}]},
          {"mode":"managed","type":"abode_env","name":"again","instances":[{"attributes":{
            "agent_id":"a1","name":"EDITOR","value":"THE-SECRET-VALUE"}}]},
          {"mode":"managed","type":"abode_env","name":"there","instances":[{"attributes":{
            "agent_id":"a2","name":"EDITOR","value":"emacs"}}]},
          {"mode":"managed","type":"abode_env","name":"lost","instances":[{"attributes":{
            "agent_id":"nobody","name":"X","value":"THE-SECRET-VALUE"}}]},
          {"mode":"managed","type":"abode_env","name":"token","instances":[{"attributes":{
            "agent_id":"a1","name":"ABODE_AGENT_TOKEN","value":"THE-SECRET-VALUE"}}]}
        ]}"#;
        let read = agents_in_state(state).unwrap();
        let env = |index: usize| -> serde_json::Value {
            serde_json::from_str(&read.agents[index].env).unwrap()
        };
        assert_eq!(env(0), serde_json::json!({"EDITOR": "vim", "KEEP": "yes"}));
        assert_eq!(env(1), serde_json::json!({"EDITOR": "emacs"}));
        let problems = read.app_problems.join("\n");
        assert!(
            problems.contains("abode_env.again: abode_env.editor already sets `EDITOR`"),
            "{problems}"
        );
        assert!(
            problems.contains("abode_env `X`: no abode_agent"),
            "{problems}"
        );
        assert!(
            problems.contains("abode_env.token: `ABODE_AGENT_TOKEN`"),
            "{problems}"
        );
        assert!(!problems.contains("THE-SECRET-VALUE"), "{problems}");
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
        let agents = agents_in_state(state).unwrap().agents;
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

    #[test]
    fn apps_are_read_from_state_by_the_agent_that_serves_them() {
        let state = br#"{"version":4,"resources":[
          {"mode":"managed","type":"abode_agent","name":"main","instances":[{"index_key":0,"attributes":{"id":"a1","token":"t1"}}]},
          {"mode":"managed","type":"abode_app","name":"web","instances":[{"attributes":{
            "agent_id":"a1","slug":"web","url":"http://localhost:3000","share":"public"}}]},
          {"mode":"managed","type":"abode_app","name":"again","instances":[{"attributes":{
            "agent_id":"a1","slug":"web","url":"http://localhost:3001"}}]},
          {"mode":"managed","type":"abode_app","name":"bad","instances":[{"attributes":{
            "agent_id":"a1","slug":"Bad","url":"http://localhost:3001"}}]},
          {"mode":"managed","type":"abode_app","name":"lost","instances":[{"attributes":{
            "agent_id":"gone","slug":"lost","url":"http://localhost:3001"}}]}
        ]}"#;
        let read = agents_in_state(state).unwrap();
        let slugs: Vec<&str> = read.agents[0]
            .apps
            .iter()
            .map(|app| app.slug.as_str())
            .collect();
        assert_eq!(slugs, ["web"]);
        assert_eq!(
            read.agents[0].apps[0].url.as_deref(),
            Some("http://localhost:3000")
        );
        assert_eq!(read.app_problems.len(), 3, "{:?}", read.app_problems);
        assert!(
            read.app_problems[0].contains("abode_app.again"),
            "{:?}",
            read.app_problems
        );
    }
}
