//! `abode_agent`: declares the agent that runs inside the workspace and connects
//! back to the platform. The provider mints the agent's identity (id and token)
//! and writes the `init_script` that starts `abode agent`; the platform learns
//! the agent from the state after the build.
//!
//! The token never appears in `init_script`: templates pass it to the process
//! through the ABODE_AGENT_TOKEN environment variable, so it does not show in
//! `ps` nor in the plan's non-sensitive values.

use std::path::PathBuf;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

use tf_provider::schema::{AttributeType, Block, NestedBlock};
use tf_provider::value::Value;
use tf_provider::{AttributePath, Diagnostics};

use crate::plumbing::ResourceType;
use crate::schema::{
    attribute_error, block, boolean, build_context, computed, known, number, optional, required,
    sensitive, string, string_map, with_default, StringMap,
};

pub(crate) const OPERATING_SYSTEMS: [&str; 2] = ["linux", "darwin"];
pub(crate) const ARCHITECTURES: [&str; 3] = ["amd64", "arm64", "armv7"];
/// The agent reads its token from this variable (the same name the contract
/// uses to hand a token back: inside the workspace it means "my token").
pub const AGENT_TOKEN_ENV: &str = abode_contract::AGENT_TOKEN;
const AGENT_CA_CERT: &str = abode_contract::AGENT_CA_CERT;
/// How long a shutdown script may run when the template does not say.
pub const DEFAULT_SHUTDOWN_TIMEOUT_SECONDS: i64 = 300;

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct AgentState {
    id: Value<String>,
    os: Value<String>,
    arch: Value<String>,
    dir: Value<String>,
    startup_script: Value<String>,
    claim_script: Value<String>,
    shutdown_script: Value<String>,
    shutdown_timeout: Value<i64>,
    disk_warning_percents: Value<Vec<Value<i64>>>,
    env: StringMap,
    token: Value<String>,
    init_script: Value<String>,
    #[serde(default)]
    metadata: Value<Vec<Value<MetadataBlock>>>,
    #[serde(default)]
    resources_monitoring: Value<Vec<Value<MonitoringBlock>>>,
}

/// A `metadata` block: a script run every `interval` seconds (issue 48).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct MetadataBlock {
    key: Value<String>,
    display_name: Value<String>,
    script: Value<String>,
    interval: Value<i64>,
    timeout: Value<i64>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct MonitoringBlock {
    #[serde(default)]
    memory: Value<Vec<Value<MemoryBlock>>>,
    #[serde(default)]
    volume: Value<Vec<Value<VolumeBlock>>>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct MemoryBlock {
    threshold: Value<i64>,
    enabled: Value<bool>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct VolumeBlock {
    path: Value<String>,
    threshold: Value<i64>,
}

/// The `metadata` and `resources_monitoring` blocks of `abode_agent`.
fn watch_blocks(schema: &mut Block) {
    schema.blocks.insert(
        "metadata".into(),
        NestedBlock::List(block(
            "A live fact shown with the workspace: the agent runs `script` every \
             `interval` seconds and the platform shows its latest output (or error) with \
             its age. Kept in the receiving server's memory only.",
            vec![
                (
                    "key",
                    required(string(), "The fact's name, unique in this agent."),
                ),
                (
                    "display_name",
                    optional(string(), "What the platform calls it (default: the key)."),
                ),
                (
                    "script",
                    required(string(), "A sh script whose output is the value."),
                ),
                (
                    "interval",
                    required(number(), "Seconds between two runs (1 or more)."),
                ),
                (
                    "timeout",
                    optional(
                        number(),
                        "Seconds a run may take before it is stopped and shown as an \
                         error (1 or more; default 5).",
                    ),
                ),
            ],
        )),
    );
    let mut monitoring = block(
        "Thresholds that tell the workspace's owner (`workspace_resource_high`) once per \
         crossing; checked by the agent every 10 seconds.",
        vec![],
    );
    monitoring.blocks.insert(
        "memory".into(),
        NestedBlock::List(block(
            "The workspace's memory (its cgroup, else its processes, as `abode stat`).",
            vec![
                ("threshold", required(number(), "Percent used (1 to 100).")),
                (
                    "enabled",
                    optional(boolean(), "Whether it is checked (default true)."),
                ),
            ],
        )),
    );
    monitoring.blocks.insert(
        "volume".into(),
        NestedBlock::List(block(
            "A filesystem inside the workspace (statvfs of `path`); repeatable.",
            vec![
                ("path", required(string(), "A path on the volume.")),
                ("threshold", required(number(), "Percent used (1 to 100).")),
            ],
        )),
    );
    schema
        .blocks
        .insert("resources_monitoring".into(), NestedBlock::List(monitoring));
}

/// Plan-time checks of the `metadata` and `resources_monitoring` blocks.
fn check_watch(diags: &mut Diagnostics, state: &AgentState) {
    let mut keys = BTreeSet::new();
    for item in known(&state.metadata)
        .into_iter()
        .flatten()
        .filter_map(known)
    {
        let key = known(&item.key).cloned().unwrap_or_default();
        if known(&item.key).is_some() {
            if key.trim().is_empty() {
                attribute_error(
                    diags,
                    "metadata",
                    "abode_agent metadata key must not be empty".into(),
                );
            } else if !keys.insert(key.clone()) {
                attribute_error(
                    diags,
                    "metadata",
                    format!("abode_agent metadata key `{key}` appears more than once"),
                );
            }
        }
        for (name, value) in [("interval", &item.interval), ("timeout", &item.timeout)] {
            if let Some(seconds) = known(value) {
                if *seconds < 1 {
                    attribute_error(
                        diags,
                        "metadata",
                        format!(
                            "abode_agent metadata `{key}`: {name} must be 1 or more seconds, not {seconds}"
                        ),
                    );
                }
            }
        }
    }
    let monitors: Vec<&MonitoringBlock> = known(&state.resources_monitoring)
        .into_iter()
        .flatten()
        .filter_map(known)
        .collect();
    if monitors.len() > 1 {
        attribute_error(
            diags,
            "resources_monitoring",
            "abode_agent has more than one resources_monitoring block: use one".into(),
        );
    }
    for monitor in monitors {
        let memories: Vec<&MemoryBlock> = known(&monitor.memory)
            .into_iter()
            .flatten()
            .filter_map(known)
            .collect();
        if memories.len() > 1 {
            attribute_error(
                diags,
                "resources_monitoring",
                "abode_agent resources_monitoring has more than one memory block: use one".into(),
            );
        }
        let thresholds = memories
            .iter()
            .map(|memory| ("memory".to_string(), &memory.threshold))
            .chain(
                known(&monitor.volume)
                    .into_iter()
                    .flatten()
                    .filter_map(known)
                    .map(|volume| {
                        (
                            format!(
                                "volume `{}`",
                                known(&volume.path).cloned().unwrap_or_default()
                            ),
                            &volume.threshold,
                        )
                    }),
            );
        for (what, threshold) in thresholds {
            if let Some(percent) = known(threshold) {
                if !(1..=100).contains(percent) {
                    attribute_error(
                        diags,
                        "resources_monitoring",
                        format!(
                            "abode_agent resources_monitoring {what}: threshold must be 1 to 100 percent, not {percent}"
                        ),
                    );
                }
            }
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct AgentResource;

/// Single-quotes a word for POSIX sh.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The script that starts the agent. `binary` is the abode executable;
/// `ca_cert`, the certificate authorities (PEM) the agent trusts besides the
/// workspace machine's, so that a workspace reaches an `https://` URL signed
/// by a private CA without a change to its image.
pub fn init_script(binary: &str, agent_url: &str, ca_cert: Option<&str>) -> String {
    let trust = match ca_cert {
        Some(pem) => format!(
            "# The certificate authorities the platform trusts (public certificates).\n\
             {AGENT_CA_CERT}={}\n\
             export {AGENT_CA_CERT}\n",
            shell_quote(pem)
        ),
        None => String::new(),
    };
    format!(
        "#!/bin/sh\n\
         # Starts the Abode agent. Its token comes from the {AGENT_TOKEN_ENV} environment\n\
         # variable (set it to abode_agent.<name>.token), never from the command line.\n\
         : \"${{{AGENT_TOKEN_ENV}:?{AGENT_TOKEN_ENV} must be set to the abode_agent token}}\"\n\
         {trust}\
         exec {} agent --url {}\n",
        shell_quote(binary),
        shell_quote(agent_url),
    )
}

fn agent_binary(context: &abode_contract::BuildContext) -> String {
    context
        .agent_binary
        .clone()
        // The provider's own executable is the provider-only binary: it cannot
        // run the agent, so without the platform's answer `abode` comes from PATH.
        .unwrap_or_else(|| PathBuf::from("abode"))
        .display()
        .to_string()
}

/// The `init_script` a plan shows, for the build's abode binary and URL.
fn planned_init_script(context: &abode_contract::BuildContext) -> Value<String> {
    init_script(
        &agent_binary(context),
        &context.agent_url,
        context.agent_ca_cert.as_deref(),
    )
    .into()
}

fn random_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

#[async_trait]
impl ResourceType for AgentResource {
    type State = AgentState;

    fn block(&self) -> Block {
        let mut schema = block(
            "The agent running inside the workspace. Start it with `init_script` and give \
             that process ABODE_AGENT_TOKEN = `token` in its environment; it then connects \
             to ABODE_AGENT_URL and reports the workspace's health.",
            vec![
                ("id", computed(string(), "The agent's id, new for every agent created.")),
                (
                    "os",
                    required(string(), "Operating system the agent runs on: linux or darwin. Changing it replaces the agent."),
                ),
                (
                    "arch",
                    required(string(), "CPU architecture: amd64, arm64 or armv7. Changing it replaces the agent."),
                ),
                ("dir", optional(string(), "The directory the agent starts in.")),
                (
                    "startup_script",
                    optional(string(), "A script the agent runs once it has started."),
                ),
                (
                    "claim_script",
                    optional(
                        string(),
                        "A script the agent runs when the prebuilt workspace it serves is \
                         claimed, with ABODE_WORKSPACE_OWNER_NAME and ABODE_WORKSPACE_NAME set \
                         to the new owner's and name (the agent keeps running: the claim \
                         does not restart it).",
                    ),
                ),
                (
                    "shutdown_script",
                    optional(
                        string(),
                        "A script the agent runs before a stop, restart or delete of the \
                         workspace is applied (same `dir` and `env` as the startup script); \
                         the build waits for it up to `shutdown_timeout`.",
                    ),
                ),
                (
                    "shutdown_timeout",
                    with_default(
                        number(),
                        "Seconds the shutdown script may run before the agent stops it and \
                         the build goes on (default 300; 0 or more).",
                    ),
                ),
                (
                    "disk_warning_percents",
                    with_default(
                        AttributeType::List(Box::new(number())),
                        "How full the agent's home volume may get, in percent, before its \
                         owner is told (at most once a day per threshold; default [90, 98]; \
                         each 1 to 100).",
                    ),
                ),
                (
                    "env",
                    optional(string_map(), "Environment variables for the agent's sessions."),
                ),
                (
                    "token",
                    sensitive(computed(
                        string(),
                        "The agent's secret: new for every agent, unless the platform hands \
                         an existing one back (ABODE_AGENT_TOKEN) when a prebuilt workspace \
                         is claimed.",
                    )),
                ),
                (
                    "init_script",
                    computed(
                        string(),
                        "A sh script that runs `abode agent --url <ABODE_AGENT_URL>`; the \
                         abode binary is ABODE_AGENT_BINARY when set, else `abode` from PATH. \
                         It holds no secret.",
                    ),
                ),
            ],
        );
        watch_blocks(&mut schema);
        schema
    }

    fn id(state: &mut Self::State) -> &mut Value<String> {
        &mut state.id
    }

    fn check(&self, diags: &mut Diagnostics, state: &Self::State) {
        check_watch(diags, state);
        if let Some(os) = known(&state.os) {
            if !OPERATING_SYSTEMS.contains(&os.as_str()) {
                attribute_error(
                    diags,
                    "os",
                    format!("abode_agent os `{os}` is not supported: use one of linux, darwin"),
                );
            }
        }
        if let Some(arch) = known(&state.arch) {
            if !ARCHITECTURES.contains(&arch.as_str()) {
                attribute_error(
                    diags,
                    "arch",
                    format!(
                        "abode_agent arch `{arch}` is not supported: use one of amd64, arm64, armv7"
                    ),
                );
            }
        }
        if let Some(timeout) = known(&state.shutdown_timeout) {
            if *timeout < 0 {
                attribute_error(
                    diags,
                    "shutdown_timeout",
                    format!(
                        "abode_agent shutdown_timeout must be 0 or more seconds, not {timeout}"
                    ),
                );
            }
        }
        if let Some(percents) = known(&state.disk_warning_percents) {
            for percent in percents.iter().filter_map(known) {
                if !(1..=100).contains(percent) {
                    attribute_error(
                        diags,
                        "disk_warning_percents",
                        format!(
                            "abode_agent disk_warning_percents must each be 1 to 100, not {percent}"
                        ),
                    );
                }
            }
        }
    }

    fn defaults(&self, state: &mut Self::State, config: &Self::State) {
        if config.shutdown_timeout.is_null() {
            state.shutdown_timeout = DEFAULT_SHUTDOWN_TIMEOUT_SECONDS.into();
        }
        if config.disk_warning_percents.is_null() {
            state.disk_warning_percents = Value::Value(
                abode_contract::disk::DEFAULT_WARNING_PERCENTS
                    .iter()
                    .map(|percent| Value::Value(*percent))
                    .collect(),
            );
        }
    }

    fn plan_create(&self, diags: &mut Diagnostics, state: &mut Self::State) -> Option<()> {
        let context = build_context(diags)?;
        state.token = match &context.agent_token {
            Some(token) => token.clone().into(),
            None => Value::Unknown,
        };
        state.init_script = planned_init_script(&context);
        Some(())
    }

    fn plan_update(
        &self,
        diags: &mut Diagnostics,
        prior: &Self::State,
        state: &mut Self::State,
    ) -> Option<Vec<AttributePath>> {
        let context = build_context(diags)?;
        let mut replace = vec![];
        if state.os != prior.os {
            replace.push(AttributePath::new("os"));
        }
        if state.arch != prior.arch {
            replace.push(AttributePath::new("arch"));
        }
        state.token = if replace.is_empty() {
            prior.token.clone()
        } else {
            Value::Unknown
        };
        state.init_script = planned_init_script(&context);
        Some(replace)
    }

    async fn create(&self, diags: &mut Diagnostics, state: Self::State) -> Option<Self::State> {
        let mut state = state;
        if !state.token.is_value() {
            match random_token() {
                Ok(token) => state.token = token.into(),
                Err(err) => {
                    diags.root_error("Cannot generate the agent token", err.to_string());
                    return None;
                }
            }
        }
        Some(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_script_quotes_its_words_and_holds_no_token() {
        let script = init_script("/opt/it's/abode", "http://127.0.0.1:7080", None);
        assert!(script.contains("exec '/opt/it'\\''s/abode' agent --url 'http://127.0.0.1:7080'\n"));
        assert!(script.contains("${ABODE_AGENT_TOKEN:?"));
        assert!(!script.contains("ABODE_AGENT_CA_CERT"));
    }

    #[test]
    fn init_script_hands_the_agent_its_ca_as_one_quoted_word() {
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB'x\n-----END CERTIFICATE-----\n";
        let script = init_script("abode", "https://abode.example", Some(pem));
        assert!(script.contains(
            "ABODE_AGENT_CA_CERT='-----BEGIN CERTIFICATE-----\nMIIB'\\''x\n-----END CERTIFICATE-----\n'\nexport ABODE_AGENT_CA_CERT\n"
        ), "{script}");
        // The trust is set before the agent starts.
        let trust = script
            .find("export ABODE_AGENT_CA_CERT")
            .unwrap_or(usize::MAX);
        let exec = script.find("exec ").unwrap_or(0);
        assert!(trust < exec, "{script}");
    }
}
