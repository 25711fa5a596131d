//! The rows the store hands out and takes in, independent of the database that
//! keeps them. Times are Unix milliseconds.

use std::collections::BTreeMap;
use std::fmt;

pub use abode_contract::log::{LogLevel, LogStage};
pub use abode_contract::parameters::ParameterDefinition;
pub use abode_contract::Transition;
/// The vocabulary of builds is the contract's, one definition for the store
/// and the wire: a status, reason or kind is stored as its name.
pub use abode_contract::{
    BuildReason, BuildStatus, JobKind, PrebuildPart, UnknownBuildReason, UnknownBuildStatus,
    UnknownJobKind,
};

use crate::roles::Roles;

from_row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct User {
        pub id: String,
        pub username: String,
        pub email: String,
        pub role: String,
        /// The argon2 PHC string; never leaves the server. Empty for a system
        /// actor's account, which no password opens.
        pub password_hash: String,
        pub created_at: i64,
        /// A system actor's reserved account ([`SystemActor`]).
        pub system: bool,
        pub status: AccountStatus,
        /// The last sign-in, or a request at most an hour before the last one
        /// seen; `None`: never since the account was created (or before
        /// accounts were watched).
        pub last_seen_at: Option<i64>,
    }
}

/// A person as the user directory lists them: their account, roles and
/// group names (`Everyone` included while the account is not deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserEntry {
    pub user: User,
    pub roles: Roles,
    pub groups: Vec<String>,
}

/// Whether an account may act.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccountStatus {
    Active,
    /// Suspended by a user admin: every request refused, nothing started
    /// for it, nothing sent to it; activation restores it as it was.
    Suspended,
    /// Not seen for the dormancy period: acts as active and becomes active
    /// again at its next sign-in or request.
    Dormant,
    /// Deleted: kept for the history that names it, refused everywhere.
    Deleted,
}

impl AccountStatus {
    /// Whether the account's sessions and tokens open anything.
    pub fn may_sign_in(self) -> bool {
        matches!(self, AccountStatus::Active | AccountStatus::Dormant)
    }
}

/// A stored account status none of [`AccountStatus`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown account status `{0}`")]
pub struct UnknownAccountStatus(pub String);

crate::named!(AccountStatus, UnknownAccountStatus, {
    Active => "active",
    Suspended => "suspended",
    Dormant => "dormant",
    Deleted => "deleted",
});

#[derive(Debug, Clone)]
pub struct NewUser {
    pub username: String,
    pub email: String,
    /// Written with the user, in the same transaction (`users.role` keeps
    /// their [`Roles::legacy_role`]).
    pub roles: Roles,
    pub password_hash: String,
}

from_row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Template {
        pub id: String,
        pub name: String,
        pub active_version_id: Option<String>,
        pub active_version: Option<i64>,
        pub created_at: i64,
        pub updated_at: i64,
        /// Set when the template is deprecated: why, as its admin said it.
        pub deprecation_message: Option<String>,
        /// The template to use instead, if its admin named one.
        pub deprecation_replacement: Option<String>,
    }
}

/// Read from a row through `templates::TemplateVersionRow`, which reads its
/// parameter declarations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateVersion {
    pub id: String,
    pub template_id: String,
    pub template_name: String,
    pub number: i64,
    pub active: bool,
    pub message: String,
    pub created_by: String,
    pub archive_sha256: String,
    pub validation_ok: bool,
    pub validation_message: String,
    /// The parameters the version declares, read at push; `None` for a
    /// version pushed before they were read.
    pub parameters: Option<Vec<ParameterDefinition>>,
    /// The presets the version declares (a JSON array of
    /// `abode_contract::presets::PresetDefinition`), read at push; `None`
    /// for a version pushed before they were read (it offers none).
    pub presets: Option<String>,
    pub created_at: i64,
}

#[derive(Debug, Clone)]
pub struct NewTemplateVersion {
    pub template_name: String,
    pub archive: Vec<u8>,
    pub archive_sha256: String,
    pub message: String,
    pub created_by: String,
    pub validation_ok: bool,
    pub validation_message: String,
    /// See [`TemplateVersion::parameters`].
    pub parameters: Option<Vec<ParameterDefinition>>,
    /// See [`TemplateVersion::presets`].
    pub presets: Option<String>,
    pub activate: bool,
}

/// Parameter values by name, as a workspace keeps them and a build is given
/// them; stored as a JSON object of strings.
pub type Parameters = BTreeMap<String, String>;

/// Read from a row through `workspaces::WorkspaceRow`, which reads its
/// parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    pub id: String,
    pub name: String,
    pub owner_id: String,
    pub owner_name: String,
    pub owner_email: String,
    pub template_id: String,
    pub template_name: String,
    pub template_version_id: String,
    pub template_version: i64,
    pub parameters: Parameters,
    /// The preset the workspace was created with, if any.
    pub preset_name: Option<String>,
    pub deleted: bool,
    pub created_at: i64,
    pub updated_at: i64,
    /// The host its host-local resources (a volume, a process) are on: a
    /// server's id or an external daemon's; only its provisioners build it.
    /// `None`: any provisioner does.
    pub host: Option<String>,
}

/// Where a stored state puts its workspace ([`Workspace::host`]), written
/// with the state in one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// The state holds host-local resources: they are on the host of the
    /// provisioner whose run wrote it (its job's host; kept as it was when
    /// the job has none, claimed before hosts were recorded).
    WritersHost,
    /// It holds none: the workspace is on no host, but after a delete's
    /// run, which keeps it where what it retained is.
    Nowhere,
}

#[derive(Debug, Clone)]
pub struct NewWorkspace {
    pub id: String,
    pub owner_id: String,
    pub name: String,
    pub template_id: String,
    pub template_version_id: String,
    pub parameters: Parameters,
    /// See [`Workspace::preset_name`].
    pub preset_name: Option<String>,
}

/// Read from a row through `builds::BuildRow`, which reads its guard report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    pub id: String,
    pub workspace_id: String,
    pub workspace_name: String,
    pub owner_name: String,
    pub number: i64,
    pub transition: Transition,
    pub status: BuildStatus,
    pub template_version_id: String,
    pub template_version: i64,
    pub initiator_id: String,
    pub initiator_name: String,
    pub reason: BuildReason,
    /// Parameter values given with this build (see [`NewBuild::parameters`]).
    pub parameters: Option<Parameters>,
    pub error: Option<String>,
    /// The guard's report on the build's plan; `None` before the plan.
    pub guard_report: Option<abode_guard::Report>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// SHA-256 of the saved binary plan of a held build.
    pub plan_digest: Option<String>,
    pub expires_at: Option<i64>,
    /// Username of who confirmed the held plan.
    pub confirmed_by: Option<String>,
    pub confirmed_at: Option<i64>,
    /// What the workspace costs a day once this build's plan is applied
    /// (`abode-cost`); `None` before the plan is judged or when the plan
    /// does not tell. A pending or running build's cost is reserved from
    /// its owner's budget.
    pub daily_cost: Option<i64>,
    /// Why the build was refused before apply (`quota`), if it was.
    pub refusal: Option<String>,
    /// A rename's new name: the build plans under it, and the workspace
    /// takes it when the build succeeds.
    pub rename_to: Option<String>,
    /// A restart's stop: a start is requested once it succeeds.
    pub then_start: bool,
    /// Why its queued job waits (no connected provisioner offers its
    /// version's tags), while it does: the line its log got.
    pub waiting: Option<String>,
}

#[derive(Debug, Clone)]
pub struct NewBuild {
    pub id: String,
    pub workspace_id: String,
    pub transition: Transition,
    pub template_version_id: String,
    pub initiator_id: String,
    pub reason: BuildReason,
    /// Parameter values for this build; `None`: the workspace's.
    pub parameters: Option<Parameters>,
    /// What the workspace keeps of them when the build succeeds (ephemeral
    /// values left out); `None`: `parameters`.
    pub workspace_parameters: Option<Parameters>,
    /// What a delete retains (`None` for other transitions).
    pub retention: Option<DeleteRetention>,
    /// A rename's new name (see [`Build::rename_to`]).
    pub rename_to: Option<String>,
    /// A restart's stop (see [`Build::then_start`]).
    pub then_start: bool,
}

/// A named part of the system that acts on its own (starts builds, owns
/// prebuilt workspaces). Each has a reserved account: its builds and audit
/// events name it like a person's, it cannot log in, no person can take its
/// name, and user lists and the first-user check do not count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SystemActor {
    /// The server itself: expiry of held builds, recovery after a crash.
    Server,
    /// Autostart, autostop, dormancy and deletion schedules.
    Scheduler,
    /// Prebuilt workspaces (it owns them until they are claimed).
    Prebuilds,
}

impl SystemActor {
    pub const ALL: [SystemActor; 3] = [
        SystemActor::Scheduler,
        SystemActor::Prebuilds,
        SystemActor::Server,
    ];

    /// The reserved username.
    pub fn username(self) -> &'static str {
        match self {
            SystemActor::Server => "server",
            SystemActor::Scheduler => "scheduler",
            SystemActor::Prebuilds => "prebuilds",
        }
    }

    /// The reserved account's id, the same in every installation.
    pub fn user_id(self) -> &'static str {
        match self {
            SystemActor::Server => "00000000-0000-4000-a000-000000000001",
            SystemActor::Scheduler => "00000000-0000-4000-a000-000000000002",
            SystemActor::Prebuilds => "00000000-0000-4000-a000-000000000003",
        }
    }

    /// The system actor whose account has this id, if any.
    pub fn by_user_id(id: &str) -> Option<SystemActor> {
        SystemActor::ALL
            .into_iter()
            .find(|actor| actor.user_id() == id)
    }

    /// The system actor that holds this username, if any.
    pub fn by_username(name: &str) -> Option<SystemActor> {
        SystemActor::ALL
            .into_iter()
            .find(|actor| actor.username() == name)
    }
}

impl fmt::Display for SystemActor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.username())
    }
}

from_row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ClaimedJob {
        pub job_id: String,
        pub build_id: String,
        pub kind: JobKind,
    }
}

/// Where an agent says it is: running its startup script, ready, or failed
/// to start (with the script's exit status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AgentLifecycle {
    Starting,
    Ready,
    StartError,
}

/// A lifecycle state none of [`AgentLifecycle`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown lifecycle state `{0}`: use starting, ready or start_error")]
pub struct UnknownAgentLifecycle(pub String);

crate::named!(AgentLifecycle, UnknownAgentLifecycle, {
    Starting => "starting",
    Ready => "ready",
    StartError => "start_error",
});

from_row! {
    /// The saved binary plan of a held build. Secret: never leaves the server.
    #[derive(Clone, PartialEq, Eq)]
    pub struct SavedPlan {
        pub plan: Vec<u8>,
        pub digest: String,
        /// SHA-256 of the workspace state the plan was made from.
        pub state_digest: String,
    }
}

impl std::fmt::Debug for SavedPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SavedPlan")
            .field("digest", &self.digest)
            .field("state_digest", &self.state_digest)
            .finish_non_exhaustive()
    }
}

from_row! {
    /// A protected resource a workspace remembers.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Protection {
        pub address: String,
        pub mode: String,
        pub build_id: String,
        pub updated_at: i64,
        /// `hold` or `destroy` when a delete retains it; `None`: destroyed.
        pub retain_expire: Option<String>,
        pub retain_for_secs: Option<i64>,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewProtection {
    pub address: String,
    pub mode: String,
    /// `hold` or `destroy` when a delete retains it; `None`: destroyed.
    pub retain_expire: Option<String>,
    pub retain_for_secs: Option<i64>,
}

/// Which audit events to list.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Only events about this workspace (by id: its history follows it
    /// through renames and transfers).
    pub workspace_id: Option<String>,
    /// Only events about workspaces this user (an id) owns now, or done by
    /// them to anything but a workspace (a member's own view).
    pub visible_to: Option<String>,
    /// Only events whose target is exactly this, whatever its type (a
    /// workspace matches by the name it had then or has now).
    pub any_target: Option<String>,
    /// Only events by the user of this name.
    pub actor: Option<String>,
    /// Only events of this action (e.g. `build.start`).
    pub action: Option<String>,
    /// Only events at or after this time (Unix ms).
    pub since: Option<i64>,
    /// Only events before this time (Unix ms).
    pub until: Option<i64>,
    /// The cursor of the previous page.
    pub after: Option<String>,
    /// Rows per page (see `pages::page_size`).
    pub limit: i64,
    /// Oldest first (an export), instead of newest first.
    pub oldest_first: bool,
}

from_row! {
    /// A build log line, its stage and level read typed (one that does not
    /// parse fails the read, naming it).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct LogLine {
        pub seq: i64,
        pub time: i64,
        pub stage: LogStage,
        pub level: LogLevel,
        pub text: String,
    }
}

#[derive(Debug, Clone)]
pub struct NewLogLine {
    pub stage: LogStage,
    pub level: LogLevel,
    pub text: String,
}

from_row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Agent {
        pub id: String,
        pub workspace_id: String,
        pub build_id: String,
        pub name: String,
        pub lifecycle: Option<AgentLifecycle>,
        pub connected_at: Option<i64>,
        pub last_heartbeat_at: Option<i64>,
        pub created_at: i64,
        /// The `abode_agent`'s `startup_script`, `dir` and `env` (a JSON object of
        /// strings), handed to the agent only.
        pub startup_script: Option<String>,
        pub dir: Option<String>,
        pub env: String,
        /// How the startup script ended when the lifecycle is `start_error`.
        pub exit_status: Option<i64>,
    }
}

#[derive(Debug, Clone)]
pub struct NewAgent {
    pub name: String,
    /// SHA-256 of the agent token, hex.
    pub token_hash: String,
    pub startup_script: Option<String>,
    /// Run by the agent when its prebuilt workspace is claimed.
    pub claim_script: Option<String>,
    pub dir: Option<String>,
    /// A JSON object of strings.
    pub env: String,
    /// The agent's apps (`abode_app`s naming it), checked.
    pub apps: Vec<abode_contract::apps::AppDefinition>,
    /// Its shutdown script and home volume thresholds.
    pub settings: AgentSettings,
}

/// What an `abode_agent` says of its shutdown script and its home volume
/// (issue 47); `None` and empty where the state has nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentSettings {
    pub shutdown_script: Option<String>,
    pub shutdown_timeout_seconds: Option<i64>,
    /// Thresholds in percent, ascending.
    pub disk_warning_percents: Vec<i64>,
    /// Its `abode_script`s, checked, one per display name (issue 48).
    pub scripts: Vec<abode_contract::script::ScriptDefinition>,
    /// Its `metadata` blocks and resource monitors (issue 48).
    pub watch: abode_contract::watch::AgentWatch,
}

/// An app of a workspace, with the agent that serves it and its health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceApp {
    pub id: String,
    pub workspace_id: String,
    pub agent_id: String,
    pub agent_name: String,
    pub definition: abode_contract::apps::AppDefinition,
    pub health: abode_contract::apps::AppHealth,
    pub health_changed_at: Option<i64>,
}

from_row! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AuditEvent {
        pub id: i64,
        pub time: i64,
        pub actor_id: Option<String>,
        pub actor_name: Option<String>,
        pub action: String,
        pub target_type: String,
        pub target: String,
        pub outcome: String,
        pub request_id: Option<String>,
        pub details: Option<String>,
        /// The workspace the event is about; `target` is then its current
        /// `owner/name`.
        pub workspace_id: Option<String>,
        /// The client of the request that recorded it (behind trusted
        /// proxies, the one they forward for) and its user agent.
        pub client_ip: Option<String>,
        pub user_agent: Option<String>,
        /// The HTTP status the request was answered with.
        pub status_code: Option<i64>,
    }
}

#[derive(Debug, Clone, Default)]
pub struct NewAuditEvent {
    pub actor_id: Option<String>,
    pub actor_name: Option<String>,
    pub action: String,
    pub target_type: String,
    pub target: String,
    pub outcome: String,
    pub request_id: Option<String>,
    pub details: Option<String>,
    /// The workspace the event is about (when `target_type` is `workspace`).
    pub workspace_id: Option<String>,
}

/// What a workspace delete does with the protected resources whose rule
/// says `on_delete = "retain"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum DeleteRetention {
    /// As each resource's rule says.
    #[default]
    Rules,
    /// Every protected resource is retained (`abode delete --retain`).
    All,
    /// Nothing is retained (`abode delete --no-retain`, owners only).
    Nothing,
}

/// A stored retention none of [`DeleteRetention`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown delete retention `{0}`")]
pub struct UnknownDeleteRetention(pub String);

crate::named!(DeleteRetention, UnknownDeleteRetention, {
    Rules => "rules",
    All => "all",
    Nothing => "none",
});
