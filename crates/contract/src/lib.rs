//! The environment contract between the Abode platform and the abode Terraform provider.
//!
//! The platform runs Terraform with a build's context in environment variables and
//! the provider (started by Terraform, inheriting that environment) reads them back.
//! Both sides go through [`BuildContext`]: the platform calls [`BuildContext::to_env`],
//! the provider calls [`BuildContext::from_env`], so a variable can never be set
//! under one name and read under another. docs/environment.md documents the table.
//!
//! Outside the platform (a template author running `terraform plan` by hand) the
//! variables are optional and fall back to a fixed development workspace, so that
//! templates stay plannable on a laptop. The platform is recognised by
//! `ABODE_WORKSPACE_ID` being set; then every variable the platform always knows is
//! required, and a missing one is an error rather than a silent development default.
//!
//! A third mode, the template import (`ABODE_TEMPLATE_IMPORT=true`), is the platform
//! planning a template with no workspace, when it is pushed, to read what the template
//! declares (its parameters): workspace and owner values are placeholders, and a
//! parameter with no value and no default reads as a placeholder instead of failing.
//!
//! Parameter declarations and the checks of a value ([`parameters`]) belong here too:
//! the provider checks values at plan time, the platform before a build is accepted,
//! and both must give the same answer. So do preset declarations ([`presets`]) and
//! their prebuild schedules ([`cron`]): the provider validates them, the platform
//! matches them against the hour.
//!
//! The rest are small modules of values both sides read: `text` (the characters
//! a name may not hold: controls and bidirectional controls; parameter and
//! preset names, display names and a template archive's paths are refused with
//! one, and values are escaped where they are shown), `apps` (what an
//! `abode_app` may say: slugs, its `url`, share levels, health checks; the
//! provider checks them at plan time, the platform again when it reads a
//! state), `env` (what an `abode_env` may set, and the same name set twice for one
//! agent in a plan), `log` (a build log line's level, a closed set, and its stage, the
//! runner's step names: an open vocabulary of 1-32 printable characters that a
//! daemon's lines are parsed into once), `retain` (what an `abode_protect`'s
//! delete rule may say), `external_auth` (which linked accounts a template
//! requires), `supervisor` (what the provider and the process supervisor
//! say to each other) and `host_local` (which resources live on the machine
//! that built them, so a workspace holding them is built only there) and
//! `deprecation` (what a template's deprecation may say, and how it is
//! said to those who meet it), `timings` (the stages a build's time
//! is told in, and a Terraform resource's plan and apply) and `launch` (how
//! the platform has the provider's executable serve a whole Terraform command).
//!
//! The words of builds and people are here too, each defined once for the
//! store, the wire and every layer between ([`vocabulary`]): a build's
//! status and reason, a job's kind, what a build is to the prebuilt
//! workspaces, which template version a build plans, and roles.
//!
//! `Transition`, the vocabulary, `LogLevel` and `LogStage` decode a database
//! column behind the `sqlx` feature, which only the store enables: Rust lets only a type's crate
//! implement a foreign trait for it. They decode a column and run no query.
//!
//! Outside this crate, only the agent names a build variable: it reads
//! `ABODE_AGENT_URL` and `ABODE_AGENT_LOG_DIR` as its flags' environment (the
//! init script exports them), and keeps an SSH client from setting
//! `ABODE_AGENT_TOKEN`.

pub mod apps;
pub mod cron;
pub mod deprecation;
pub mod disk;
pub mod env;
pub mod external_auth;
pub mod host_local;
pub mod launch;
pub mod log;
pub mod parameters;
pub mod presets;
pub mod retain;
pub mod script;
pub mod supervisor;
pub mod text;
pub mod timings;
pub mod vocabulary;
pub mod watch;

pub use vocabulary::{
    BuildReason, BuildStatus, JobKind, PrebuildPart, Role, Roles, UnknownBuildReason,
    UnknownBuildStatus, UnknownJobKind, UnknownRole, VersionChoice,
};

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

pub const WORKSPACE_ID: &str = "ABODE_WORKSPACE_ID";
pub const WORKSPACE_NAME: &str = "ABODE_WORKSPACE_NAME";
pub const WORKSPACE_TRANSITION: &str = "ABODE_WORKSPACE_TRANSITION";
pub const WORKSPACE_BUILD_ID: &str = "ABODE_WORKSPACE_BUILD_ID";
pub const WORKSPACE_OWNER_ID: &str = "ABODE_WORKSPACE_OWNER_ID";
pub const WORKSPACE_OWNER_NAME: &str = "ABODE_WORKSPACE_OWNER_NAME";
pub const WORKSPACE_OWNER_EMAIL: &str = "ABODE_WORKSPACE_OWNER_EMAIL";
pub const WORKSPACE_OWNER_FULL_NAME: &str = "ABODE_WORKSPACE_OWNER_FULL_NAME";
pub const WORKSPACE_OWNER_GROUPS: &str = "ABODE_WORKSPACE_OWNER_GROUPS";
pub const TEMPLATE_ID: &str = "ABODE_TEMPLATE_ID";
pub const TEMPLATE_NAME: &str = "ABODE_TEMPLATE_NAME";
pub const TEMPLATE_VERSION: &str = "ABODE_TEMPLATE_VERSION";
pub const IS_PREBUILD: &str = "ABODE_IS_PREBUILD";
pub const IS_PREBUILD_CLAIM: &str = "ABODE_IS_PREBUILD_CLAIM";
pub const AGENT_URL: &str = "ABODE_AGENT_URL";
pub const AGENT_TOKEN: &str = "ABODE_AGENT_TOKEN";
pub const AGENT_BINARY: &str = "ABODE_AGENT_BINARY";
pub const AGENT_CA_CERT: &str = "ABODE_AGENT_CA_CERT";
/// Set by the agent in its sessions and scripts: the socket through which
/// `abode external-auth access-token` and Git's askpass ask the agent for
/// the owner's tokens (docs/external-auth.md).
pub const AGENT_AUTH_SOCKET: &str = "ABODE_AGENT_AUTH_SOCKET";
/// Set by the agent in its sessions and scripts: its own pid, so that
/// `abode stat` inside the workspace measures the agent's processes.
pub const AGENT_PID: &str = "ABODE_AGENT_PID";
pub const VOLUMES_DIR: &str = "ABODE_VOLUMES_DIR";
pub const PROCESS_LOGS_DIR: &str = "ABODE_PROCESS_LOGS_DIR";
pub const PROCESS_SUPERVISOR: &str = "ABODE_PROCESS_SUPERVISOR";
pub const PARAMETERS: &str = "ABODE_PARAMETERS";
pub const TEMPLATE_IMPORT: &str = "ABODE_TEMPLATE_IMPORT";

/// Every variable of the contract, in the order of docs/environment.md.
pub const ALL_VARIABLES: &[&str] = &[
    WORKSPACE_ID,
    WORKSPACE_NAME,
    WORKSPACE_TRANSITION,
    WORKSPACE_BUILD_ID,
    WORKSPACE_OWNER_ID,
    WORKSPACE_OWNER_NAME,
    WORKSPACE_OWNER_EMAIL,
    WORKSPACE_OWNER_FULL_NAME,
    WORKSPACE_OWNER_GROUPS,
    TEMPLATE_ID,
    TEMPLATE_NAME,
    TEMPLATE_VERSION,
    IS_PREBUILD,
    IS_PREBUILD_CLAIM,
    AGENT_URL,
    AGENT_TOKEN,
    AGENT_BINARY,
    AGENT_CA_CERT,
    VOLUMES_DIR,
    PROCESS_LOGS_DIR,
    PROCESS_SUPERVISOR,
    PARAMETERS,
    TEMPLATE_IMPORT,
];

/// Variables the platform always knows: when it runs the build (recognised by
/// `ABODE_WORKSPACE_ID`), leaving one out is a platform bug worth failing on.
pub const REQUIRED_IN_PLATFORM: &[&str] = &[
    WORKSPACE_ID,
    WORKSPACE_NAME,
    WORKSPACE_TRANSITION,
    WORKSPACE_BUILD_ID,
    WORKSPACE_OWNER_ID,
    WORKSPACE_OWNER_NAME,
    TEMPLATE_ID,
    TEMPLATE_NAME,
    TEMPLATE_VERSION,
    AGENT_URL,
    VOLUMES_DIR,
];

/// Development defaults: a fixed workspace so that plans made by hand are stable.
pub const DEV_WORKSPACE_ID: &str = "00000000-0000-4000-8000-000000000001";
pub const DEV_WORKSPACE_NAME: &str = "dev";
pub const DEV_BUILD_ID: &str = "00000000-0000-4000-8000-000000000002";
pub const DEV_OWNER_ID: &str = "00000000-0000-4000-8000-000000000003";
pub const DEV_OWNER_NAME: &str = "developer";
pub const DEV_OWNER_EMAIL: &str = "developer@localhost";
pub const DEV_OWNER_FULL_NAME: &str = "Template Developer";
pub const DEV_TEMPLATE_ID: &str = "00000000-0000-4000-8000-000000000004";
pub const DEV_TEMPLATE_NAME: &str = "dev";
pub const DEV_TEMPLATE_VERSION: &str = "dev";
pub const DEV_AGENT_URL: &str = "http://127.0.0.1:7080";
/// Relative to the directory Terraform runs in (made absolute when read).
pub const DEV_VOLUMES_DIR: &str = ".abode/volumes";
/// The process logs directory's name beside the volumes directory, when not set.
pub const PROCESS_LOGS_DIR_NAME: &str = "process-logs";

/// Which build the platform is running: the one transition of the
/// environment contract, the store and the API's wire (`abode-sdk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transition {
    Start,
    Stop,
    Delete,
}

impl Transition {
    pub fn as_str(self) -> &'static str {
        match self {
            Transition::Start => "start",
            Transition::Stop => "stop",
            Transition::Delete => "delete",
        }
    }
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Transition {
    type Err = ContractError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "start" => Ok(Transition::Start),
            "stop" => Ok(Transition::Stop),
            "delete" => Ok(Transition::Delete),
            other => Err(ContractError::Invalid {
                variable: WORKSPACE_TRANSITION,
                reason: format!("`{other}` is not one of start, stop, delete"),
            }),
        }
    }
}

/// A stored transition that is none of start, stop, delete (written by a newer
/// server, or by hand): an error naming the value, never a guess.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown transition `{0}`: one of start, stop, delete")]
pub struct UnknownTransition(pub String);

impl TryFrom<String> for Transition {
    type Error = UnknownTransition;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse().map_err(|_| UnknownTransition(value))
    }
}

/// A transition is stored as its name; reading an unknown name fails the read.
#[cfg(feature = "sqlx")]
mod stored {
    use super::Transition;

    impl<DB: sqlx::Database> sqlx::Type<DB> for Transition
    where
        String: sqlx::Type<DB>,
    {
        fn type_info() -> DB::TypeInfo {
            <String as sqlx::Type<DB>>::type_info()
        }

        fn compatible(ty: &DB::TypeInfo) -> bool {
            <String as sqlx::Type<DB>>::compatible(ty)
        }
    }

    impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for Transition
    where
        String: sqlx::Decode<'r, DB>,
    {
        fn decode(value: DB::ValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
            let text = <String as sqlx::Decode<'r, DB>>::decode(value)?;
            Ok(Transition::try_from(text)?)
        }
    }
}

/// A typed value stored as its name (needs `sqlx` where it is used): the
/// column reads as text, and a name the type's `FromStr` does not know fails
/// the read with that error (which names the value), never a fallback. The
/// encoding is the type's `as_str()`, bound where it is written. The store's
/// `stored_by_name!` is this one.
#[macro_export]
#[doc(hidden)]
macro_rules! stored_as_text {
    ($type:ty) => {
        impl<DB: sqlx::Database> sqlx::Type<DB> for $type
        where
            String: sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <String as sqlx::Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <String as sqlx::Type<DB>>::compatible(ty)
            }
        }

        impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for $type
        where
            String: sqlx::Decode<'r, DB>,
        {
            fn decode(value: DB::ValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
                let text = <String as sqlx::Decode<'r, DB>>::decode(value)?;
                Ok(text.parse::<$type>()?)
            }
        }
    };
}

/// Why the environment does not describe a build.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    #[error("{WORKSPACE_ID} is set, so Abode is running this build, but {} missing: the platform must set every build variable", missing_list(.0))]
    Missing(Vec<&'static str>),
    #[error("{variable} is invalid: {reason}")]
    Invalid {
        variable: &'static str,
        reason: String,
    },
    #[error("cannot resolve {variable} relative to the current directory: {reason}")]
    CurrentDir {
        variable: &'static str,
        reason: String,
    },
}

fn missing_list(names: &[&'static str]) -> String {
    match names {
        [one] => format!("{one} is"),
        many => format!("{} are", many.join(", ")),
    }
}

/// Everything the platform tells the provider about one build.
///
/// Secret: `agent_token` (never printed by `Debug`).
#[derive(Clone, PartialEq, Eq)]
pub struct BuildContext {
    pub workspace_id: String,
    pub workspace_name: String,
    pub transition: Transition,
    pub build_id: String,
    pub owner_id: String,
    pub owner_name: String,
    pub owner_email: String,
    pub owner_full_name: String,
    pub owner_groups: Vec<String>,
    pub template_id: String,
    pub template_name: String,
    pub template_version: String,
    pub is_prebuild: bool,
    pub is_prebuild_claim: bool,
    pub agent_url: String,
    /// An existing agent token handed back (claimed prebuilds keep their agent).
    pub agent_token: Option<String>,
    /// The program `abode_agent.init_script` starts; `None`: the provider's own binary.
    pub agent_binary: Option<PathBuf>,
    /// The certificate authorities (PEM) the agent trusts besides its
    /// machine's, to reach an `https://` agent URL signed by a private CA.
    pub agent_ca_cert: Option<String>,
    pub volumes_dir: PathBuf,
    pub process_logs_dir: PathBuf,
    /// The unix socket of the machine's process supervisor: when set,
    /// `abode_process` asks it to start, watch and stop processes (a process
    /// forked inside Terraform's sandbox would die with it).
    pub process_supervisor: Option<PathBuf>,
    /// Parameter values chosen for this build, by parameter name, as strings
    /// (numbers and bools in their Terraform spelling, lists as JSON arrays).
    pub parameters: BTreeMap<String, String>,
    /// True when no platform variables were found and the defaults were used.
    pub development: bool,
    /// True when the platform plans the template with no workspace, to read its
    /// declarations (`ABODE_TEMPLATE_IMPORT`): see [`BuildContext::template_import`].
    pub template_import: bool,
}

impl fmt::Debug for BuildContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuildContext")
            .field("workspace_id", &self.workspace_id)
            .field("workspace_name", &self.workspace_name)
            .field("transition", &self.transition)
            .field("build_id", &self.build_id)
            .field("owner_id", &self.owner_id)
            .field("owner_name", &self.owner_name)
            .field("template_id", &self.template_id)
            .field("template_version", &self.template_version)
            .field("agent_url", &self.agent_url)
            .field(
                "agent_token",
                &self.agent_token.as_ref().map(|_| "(sensitive)"),
            )
            .field("volumes_dir", &self.volumes_dir)
            .field("development", &self.development)
            .field("template_import", &self.template_import)
            .finish_non_exhaustive()
    }
}

impl BuildContext {
    /// The fixed development workspace, rooted at `base_dir` (where Terraform runs).
    pub fn development(base_dir: &Path) -> Self {
        let volumes_dir = base_dir.join(DEV_VOLUMES_DIR);
        let process_logs_dir = sibling_logs_dir(&volumes_dir);
        BuildContext {
            workspace_id: DEV_WORKSPACE_ID.into(),
            workspace_name: DEV_WORKSPACE_NAME.into(),
            transition: Transition::Start,
            build_id: DEV_BUILD_ID.into(),
            owner_id: DEV_OWNER_ID.into(),
            owner_name: DEV_OWNER_NAME.into(),
            owner_email: DEV_OWNER_EMAIL.into(),
            owner_full_name: DEV_OWNER_FULL_NAME.into(),
            owner_groups: Vec::new(),
            template_id: DEV_TEMPLATE_ID.into(),
            template_name: DEV_TEMPLATE_NAME.into(),
            template_version: DEV_TEMPLATE_VERSION.into(),
            is_prebuild: false,
            is_prebuild_claim: false,
            agent_url: DEV_AGENT_URL.into(),
            agent_token: None,
            agent_binary: None,
            agent_ca_cert: None,
            volumes_dir,
            process_logs_dir,
            process_supervisor: None,
            parameters: BTreeMap::new(),
            development: true,
            template_import: false,
        }
    }

    /// A template import rooted at `base_dir`: the platform plans a template
    /// with no workspace (at push) to read its declarations. The workspace
    /// and owner are the development placeholders; set the template's name,
    /// the agent URL and directories inside the import's scratch dir as needed.
    /// A parameter with no value and no default reads as
    /// [`parameters::ParameterDefinition::placeholder_value`].
    pub fn template_import(base_dir: &Path) -> Self {
        BuildContext {
            development: false,
            template_import: true,
            ..Self::development(base_dir)
        }
    }

    /// Reads the build from this process's environment; relative directories are
    /// resolved against the current directory.
    pub fn from_env() -> Result<Self, ContractError> {
        let cwd = std::env::current_dir().map_err(|err| ContractError::CurrentDir {
            variable: VOLUMES_DIR,
            reason: err.to_string(),
        })?;
        Self::from_lookup(|name| std::env::var(name).ok(), &cwd)
    }

    /// Reads the build from any variable source (the environment, a test's map).
    /// Empty values count as unset.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
        base_dir: &Path,
    ) -> Result<Self, ContractError> {
        let get = |name: &str| lookup(name).filter(|value| !value.is_empty());
        let in_platform = get(WORKSPACE_ID).is_some();
        let template_import = match get(TEMPLATE_IMPORT) {
            Some(value) => parse_bool(TEMPLATE_IMPORT, &value)?,
            None => false,
        };
        if template_import && in_platform {
            return Err(ContractError::Invalid {
                variable: TEMPLATE_IMPORT,
                reason: format!(
                    "a template import plans a template with no workspace, but {WORKSPACE_ID} is set"
                ),
            });
        }
        if in_platform {
            let missing: Vec<&'static str> = REQUIRED_IN_PLATFORM
                .iter()
                .copied()
                .filter(|name| get(name).is_none())
                .collect();
            if !missing.is_empty() {
                return Err(ContractError::Missing(missing));
            }
        }

        let mut context = if template_import {
            Self::template_import(base_dir)
        } else {
            Self::development(base_dir)
        };
        context.development = !in_platform && !template_import;
        let set = |target: &mut String, name: &str| {
            if let Some(value) = get(name) {
                *target = value;
            }
        };
        set(&mut context.workspace_id, WORKSPACE_ID);
        set(&mut context.workspace_name, WORKSPACE_NAME);
        set(&mut context.build_id, WORKSPACE_BUILD_ID);
        set(&mut context.owner_id, WORKSPACE_OWNER_ID);
        set(&mut context.owner_name, WORKSPACE_OWNER_NAME);
        set(&mut context.template_id, TEMPLATE_ID);
        set(&mut context.template_name, TEMPLATE_NAME);
        set(&mut context.template_version, TEMPLATE_VERSION);
        set(&mut context.agent_url, AGENT_URL);
        if in_platform {
            // The platform's owner may have no email or full name; the development
            // placeholders must not leak into a real workspace.
            context.owner_email = get(WORKSPACE_OWNER_EMAIL).unwrap_or_default();
            context.owner_full_name = get(WORKSPACE_OWNER_FULL_NAME).unwrap_or_default();
        } else {
            set(&mut context.owner_email, WORKSPACE_OWNER_EMAIL);
            set(&mut context.owner_full_name, WORKSPACE_OWNER_FULL_NAME);
        }
        if let Some(value) = get(WORKSPACE_TRANSITION) {
            context.transition = value.parse()?;
        }
        if let Some(value) = get(WORKSPACE_OWNER_GROUPS) {
            context.owner_groups = parse_groups(&value)?;
        }
        if let Some(value) = get(IS_PREBUILD) {
            context.is_prebuild = parse_bool(IS_PREBUILD, &value)?;
        }
        if let Some(value) = get(IS_PREBUILD_CLAIM) {
            context.is_prebuild_claim = parse_bool(IS_PREBUILD_CLAIM, &value)?;
        }
        if context.is_prebuild && context.is_prebuild_claim {
            return Err(ContractError::Invalid {
                variable: IS_PREBUILD_CLAIM,
                reason: format!(
                    "a build cannot both create a prebuild ({IS_PREBUILD}) and claim one"
                ),
            });
        }
        context.agent_token = get(AGENT_TOKEN);
        context.agent_binary = get(AGENT_BINARY).map(|value| base_dir.join(value));
        context.agent_ca_cert = get(AGENT_CA_CERT);
        if let Some(value) = get(VOLUMES_DIR) {
            context.volumes_dir = base_dir.join(value);
            context.process_logs_dir = sibling_logs_dir(&context.volumes_dir);
        }
        if let Some(value) = get(PROCESS_LOGS_DIR) {
            context.process_logs_dir = base_dir.join(value);
        }
        context.process_supervisor = get(PROCESS_SUPERVISOR).map(|value| base_dir.join(value));
        if let Some(value) = get(PARAMETERS) {
            context.parameters = parse_parameters(&value)?;
        }
        Ok(context)
    }

    /// The variables that make [`BuildContext::from_env`] return this context
    /// (except `development`: a context written out is a platform context or
    /// a template import). A template import leaves out `ABODE_WORKSPACE_ID`,
    /// whose presence means a workspace's build.
    /// Contains the agent token: never log the result.
    pub fn to_env(&self) -> Vec<(&'static str, String)> {
        let mut vars = if self.template_import {
            vec![(TEMPLATE_IMPORT, "true".to_string())]
        } else {
            vec![(WORKSPACE_ID, self.workspace_id.clone())]
        };
        vars.extend([
            (WORKSPACE_NAME, self.workspace_name.clone()),
            (WORKSPACE_TRANSITION, self.transition.as_str().to_string()),
            (WORKSPACE_BUILD_ID, self.build_id.clone()),
            (WORKSPACE_OWNER_ID, self.owner_id.clone()),
            (WORKSPACE_OWNER_NAME, self.owner_name.clone()),
            (WORKSPACE_OWNER_EMAIL, self.owner_email.clone()),
            (WORKSPACE_OWNER_FULL_NAME, self.owner_full_name.clone()),
            (
                WORKSPACE_OWNER_GROUPS,
                serde_json::Value::from(self.owner_groups.clone()).to_string(),
            ),
            (TEMPLATE_ID, self.template_id.clone()),
            (TEMPLATE_NAME, self.template_name.clone()),
            (TEMPLATE_VERSION, self.template_version.clone()),
            (IS_PREBUILD, self.is_prebuild.to_string()),
            (IS_PREBUILD_CLAIM, self.is_prebuild_claim.to_string()),
            (AGENT_URL, self.agent_url.clone()),
            (VOLUMES_DIR, self.volumes_dir.display().to_string()),
            (
                PROCESS_LOGS_DIR,
                self.process_logs_dir.display().to_string(),
            ),
            (
                PARAMETERS,
                serde_json::Value::Object(
                    self.parameters
                        .iter()
                        .map(|(name, value)| (name.clone(), value.clone().into()))
                        .collect(),
                )
                .to_string(),
            ),
        ]);
        if let Some(token) = &self.agent_token {
            vars.push((AGENT_TOKEN, token.clone()));
        }
        if let Some(binary) = &self.agent_binary {
            vars.push((AGENT_BINARY, binary.display().to_string()));
        }
        if let Some(ca) = &self.agent_ca_cert {
            vars.push((AGENT_CA_CERT, ca.clone()));
        }
        if let Some(socket) = &self.process_supervisor {
            vars.push((PROCESS_SUPERVISOR, socket.display().to_string()));
        }
        vars
    }

    /// `start_count` of `abode_workspace`: 1 for a start, 0 otherwise.
    pub fn start_count(&self) -> i64 {
        i64::from(self.transition == Transition::Start)
    }
}

fn sibling_logs_dir(volumes_dir: &Path) -> PathBuf {
    volumes_dir
        .parent()
        .unwrap_or(volumes_dir)
        .join(PROCESS_LOGS_DIR_NAME)
}

fn parse_bool(variable: &'static str, value: &str) -> Result<bool, ContractError> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(ContractError::Invalid {
            variable,
            reason: format!("`{other}` is not `true` or `false`"),
        }),
    }
}

fn parse_groups(value: &str) -> Result<Vec<String>, ContractError> {
    serde_json::from_str::<Vec<String>>(value).map_err(|err| ContractError::Invalid {
        variable: WORKSPACE_OWNER_GROUPS,
        reason: format!("expected a JSON array of group names such as [\"devs\"]: {err}"),
    })
}

fn parse_parameters(value: &str) -> Result<BTreeMap<String, String>, ContractError> {
    // The values may be secrets: the error names the position, never the text.
    let object: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(value).map_err(|err| ContractError::Invalid {
            variable: PARAMETERS,
            reason: format!(
                "expected a JSON object of parameter names to string values (line {}, column {})",
                err.line(),
                err.column()
            ),
        })?;
    object
        .into_iter()
        .map(|(name, value)| match value {
            serde_json::Value::String(text) => Ok((name, text)),
            _ => Err(ContractError::Invalid {
                variable: PARAMETERS,
                reason: format!("the value of parameter `{name}` must be a JSON string"),
            }),
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(vars: &[(&str, &str)]) -> Result<BuildContext, ContractError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        BuildContext::from_lookup(|name| map.get(name).cloned(), Path::new("/work/tpl"))
    }

    fn platform_context() -> BuildContext {
        let mut context = BuildContext::development(Path::new("/data"));
        context.development = false;
        context.workspace_id = "ws-1".into();
        context.transition = Transition::Stop;
        context.owner_groups = vec!["devs".into(), "a,b".into()];
        context.is_prebuild_claim = true;
        context.agent_token = Some("secret-token".into());
        context.agent_binary = Some("/usr/bin/abode".into());
        context.volumes_dir = "/data/volumes".into();
        context.process_logs_dir = "/data/logs".into();
        context.parameters = [("region".to_string(), "eu \"west\"".to_string())].into();
        context
    }

    #[test]
    fn nothing_set_gives_the_development_workspace() {
        let context = read(&[]).unwrap();
        assert!(context.development);
        assert_eq!(context.transition, Transition::Start);
        assert_eq!(context.start_count(), 1);
        assert_eq!(context.workspace_id, DEV_WORKSPACE_ID);
        assert_eq!(context.volumes_dir, Path::new("/work/tpl/.abode/volumes"));
        assert_eq!(
            context.process_logs_dir,
            Path::new("/work/tpl/.abode/process-logs")
        );
    }

    #[test]
    fn single_variables_override_development_defaults() {
        let context = read(&[(WORKSPACE_TRANSITION, "stop"), (VOLUMES_DIR, "vols")]).unwrap();
        assert!(context.development);
        assert_eq!(context.start_count(), 0);
        assert_eq!(context.volumes_dir, Path::new("/work/tpl/vols"));
    }

    #[test]
    fn to_env_round_trips_through_from_lookup() {
        let context = platform_context();
        let vars: Vec<(&str, String)> = context.to_env();
        let pairs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(read(&pairs).unwrap(), context);
    }

    #[test]
    fn invalid_values_are_named() {
        let cases: &[(&str, &str, &str)] = &[
            (
                WORKSPACE_TRANSITION,
                "foo",
                "ABODE_WORKSPACE_TRANSITION is invalid: `foo` is not one of start, stop, delete",
            ),
            (
                IS_PREBUILD,
                "yes",
                "ABODE_IS_PREBUILD is invalid: `yes` is not `true` or `false`",
            ),
            (
                WORKSPACE_OWNER_GROUPS,
                "devs",
                "ABODE_WORKSPACE_OWNER_GROUPS is invalid: expected a JSON array",
            ),
            (
                PARAMETERS,
                "{\"a\": 1}",
                "ABODE_PARAMETERS is invalid: the value of parameter `a` must be a JSON string",
            ),
            (
                PARAMETERS,
                "{\"a\": \"hunter2\"",
                "ABODE_PARAMETERS is invalid: expected a JSON object",
            ),
        ];
        for (variable, value, expected) in cases {
            let message = read(&[(variable, value)]).unwrap_err().to_string();
            assert!(
                message.starts_with(expected),
                "{variable}={value}: {message}"
            );
            assert!(!message.contains("hunter2"), "{message}");
        }
    }

    #[test]
    fn platform_builds_must_set_every_required_variable() {
        let message = read(&[(WORKSPACE_ID, "ws-1"), (WORKSPACE_NAME, "w")])
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("ABODE_WORKSPACE_TRANSITION, ABODE_WORKSPACE_BUILD_ID"),
            "{message}"
        );
        assert!(!message.contains("ABODE_WORKSPACE_NAME,"), "{message}");
    }

    #[test]
    fn debug_hides_the_agent_token() {
        let text = format!("{:?}", platform_context());
        assert!(!text.contains("secret-token"), "{text}");
    }

    #[test]
    fn template_import_round_trips_without_a_workspace_id() {
        let mut context = BuildContext::template_import(Path::new("/scratch"));
        context.template_name = "docker".into();
        context.volumes_dir = "/scratch/volumes".into();
        context.process_logs_dir = "/scratch/logs".into();
        let vars = context.to_env();
        assert!(vars.contains(&(TEMPLATE_IMPORT, "true".to_string())));
        assert!(vars.iter().all(|(name, _)| *name != WORKSPACE_ID));
        let pairs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let read_back = read(&pairs).unwrap();
        assert_eq!(read_back, context);
        assert!(read_back.template_import && !read_back.development);
        assert_eq!(read_back.workspace_id, DEV_WORKSPACE_ID);
    }

    #[test]
    fn template_import_is_no_workspace_build() {
        // The variables, and whether they make an import (or the error's start).
        type Case<'a> = (&'a [(&'a str, &'a str)], Result<bool, &'a str>);
        let cases: &[Case] = &[
            (&[(TEMPLATE_IMPORT, "true")], Ok(true)),
            (&[(TEMPLATE_IMPORT, "false")], Ok(false)),
            (&[(TEMPLATE_IMPORT, "")], Ok(false)),
            (
                &[(TEMPLATE_IMPORT, "yes")],
                Err("ABODE_TEMPLATE_IMPORT is invalid: `yes` is not `true` or `false`"),
            ),
            (
                &[(TEMPLATE_IMPORT, "true"), (WORKSPACE_ID, "ws-1")],
                Err("ABODE_TEMPLATE_IMPORT is invalid: a template import plans a template with no workspace"),
            ),
        ];
        for (vars, expected) in cases {
            match (read(vars), expected) {
                (Ok(context), Ok(import)) => assert_eq!(context.template_import, *import),
                (Err(error), Err(text)) => assert!(error.to_string().starts_with(text), "{error}"),
                (other, _) => panic!("{vars:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn prebuild_and_claim_are_exclusive() {
        let err = read(&[(IS_PREBUILD, "true"), (IS_PREBUILD_CLAIM, "true")]).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("ABODE_IS_PREBUILD_CLAIM is invalid"));
    }
}
