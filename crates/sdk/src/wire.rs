//! The JSON shapes of docs/api.md, as the server writes them and every
//! client reads them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{BuildStatus, Transition};

/// A user account.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct User {
    pub id: String,
    pub username: String,
    #[serde(default)]
    pub email: String,
    /// Every role the user holds, widest first (servers from before roles
    /// were sets send only `role`).
    #[serde(default)]
    pub roles: Vec<String>,
    pub role: String,
    #[serde(default)]
    pub created_at: Option<String>,
    /// `active`, `suspended`, `dormant` or `deleted` (servers from before
    /// account status send none: active).
    #[serde(default)]
    pub status: Option<String>,
    /// The last sign-in or request seen (at most an hour behind).
    #[serde(default)]
    pub last_seen_at: Option<String>,
    /// The groups the person is a member of, `Everyone` included: in the
    /// user directory (`GET /users`, `GET /users/{name}`), not elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<String>>,
}

impl User {
    /// `owner, member`: the roles, or the single `role` of an older server.
    pub fn roles_text(&self) -> String {
        if self.roles.is_empty() {
            self.role.clone()
        } else {
            self.roles.join(", ")
        }
    }
}

/// Answer to a login or an account's creation: the one that carries its
/// session token. Not `Debug`: it holds the token.
#[derive(Serialize, Deserialize)]
pub struct LoginResponse {
    pub user: User,
    pub token: String,
}

/// `GET /sign-in-methods` (no authentication): how people sign in to this
/// server.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SignInMethods {
    /// `POST /login` with a username and password is on.
    pub password: bool,
    /// Single sign-on through an OpenID provider, when it is on.
    #[serde(default)]
    pub oidc: Option<OidcMethod>,
}

/// Single sign-on as `GET /sign-in-methods` describes it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OidcMethod {
    /// What the sign-in button says after "Sign in with".
    pub sign_in_text: String,
    /// Where a browser starts (on this server): `/api/v1/oidc/login`.
    pub login_path: String,
}

/// A template: a name with numbered immutable versions, one of them active.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Template {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub active_version: Option<u64>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub updated_at: Option<String>,
    /// Set when the template is deprecated: it takes no new workspaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<Deprecation>,
}

/// Why a template is deprecated (`abode templates deprecate`), and what to
/// use instead.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Deprecation {
    pub message: String,
    /// The template to use instead, if its admin named one.
    #[serde(default)]
    pub replacement: Option<String>,
}

/// The outcome of `terraform init` + `terraform validate` on a pushed version.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Validation {
    pub ok: bool,
    #[serde(default)]
    pub message: String,
}

/// One immutable version of a template.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TemplateVersion {
    pub id: String,
    #[serde(default)]
    pub template: String,
    pub number: u64,
    pub active: bool,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub created_by: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub validation: Validation,
}

/// A template version's presets (`GET /templates/{name}/presets`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TemplatePresets {
    pub template: String,
    pub version: u64,
    pub presets: Vec<Preset>,
}

/// A named set of parameter values, and optionally a pool of prebuilt
/// workspaces of it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Preset {
    pub name: String,
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    #[serde(default)]
    pub prebuilds: Option<PresetPrebuilds>,
}

/// How many prebuilt workspaces of a preset to keep, when, for how long.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PresetPrebuilds {
    pub instances: i64,
    /// 0: they never expire.
    #[serde(default)]
    pub ttl_seconds: i64,
    #[serde(default)]
    pub scheduling: Option<PresetScheduling>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PresetScheduling {
    pub timezone: String,
    #[serde(default)]
    pub schedules: Vec<PresetSchedule>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PresetSchedule {
    pub cron: String,
    pub instances: i64,
}

/// Answer to a push (`POST /templates/{name}/versions`). The lint's report
/// is a type parameter, as a build's guard report is: the client reads the
/// SDK's [`LintReport`], the server writes the one it keeps. Fields in the
/// order the answer has always listed them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(bound(deserialize = "Lint: Deserialize<'de>"))]
pub struct TemplateVersionResponse<Lint = LintReport> {
    /// The lint's findings on the pushed files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lint: Option<Lint>,
    /// The provisioner tags its builds need (`key=value`).
    #[serde(default)]
    pub provisioner_tags: Vec<String>,
    pub template: Template,
    pub version: TemplateVersion,
    /// Why no connected provisioner would take a build of this version now
    /// (its tags match none); absent when one would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// Answer to an activation (`POST /templates/{name}/versions/{number}/activate`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TemplateActivated {
    pub template: Template,
    pub version: TemplateVersion,
}

/// One version with the lint's findings it keeps
/// (`GET /templates/{name}/versions/{number}`); the lint's report a type
/// parameter, as in [`TemplateVersionResponse`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(bound(deserialize = "Lint: Deserialize<'de>"))]
pub struct TemplateVersionDetail<Lint = LintReport> {
    /// `None`: pushed before the lint existed, never linted.
    #[serde(default)]
    pub lint: Option<Lint>,
    /// The version's latest fleet preview (`None`: never previewed).
    #[serde(default)]
    pub preview: Option<Preview>,
    /// The provisioner tags its builds need (`key=value`).
    #[serde(default)]
    pub provisioner_tags: Vec<String>,
    pub version: TemplateVersion,
}

/// Liveness (`GET /health`): `ok`, and the server's version.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Health {
    pub status: String,
    pub version: String,
}

/// Readiness (`GET /ready`): `ready`, or `unavailable` with the reason
/// (answered with 503).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Readiness {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub status: String,
}

/// Whether the prebuilds reconciliation is paused (`POST /prebuilds/pause`
/// and `/prebuilds/resume`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct PrebuildsPaused {
    pub paused: bool,
}

/// A provisioner of one of the servers (`GET /provisioners`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Provisioner {
    pub server: String,
    pub name: String,
    /// The host it runs on: its server's id, or its daemon's (the
    /// workspaces it builds keep their volumes and processes there; empty
    /// for a row an older server wrote).
    #[serde(default)]
    pub host: String,
    pub kind: String,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    pub version: String,
    pub started_at: String,
    pub last_heartbeat_at: String,
    /// `connected` or `stale`.
    pub status: String,
    #[serde(default)]
    pub current_job: Option<ProvisionerJob>,
}

/// What a provisioner runs now.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProvisionerJob {
    /// `build` or `preview`.
    pub kind: String,
    pub workspace: String,
    /// A build's number and transition; absent for a preview.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_number: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transition: Option<String>,
}

/// A provisioner key as listed (`GET /provisioner-keys`): never its secret.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProvisionerKey {
    pub name: String,
    /// `key=value`, sorted.
    #[serde(default)]
    pub tags: Vec<String>,
    pub created_at: String,
    /// The username of the owner who made it.
    pub created_by: String,
}

/// Answer to a provisioner key's creation, the one answer that carries the
/// key's secret. Not `Debug`: it holds the secret.
#[derive(Serialize, Deserialize)]
pub struct CreatedProvisionerKey {
    pub key: ProvisionerKey,
    pub secret: String,
}

/// A fleet preview's summary (docs/api.md, "Fleet previews").
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Preview {
    pub id: String,
    pub template: String,
    pub version: u64,
    pub requested_by: String,
    pub created_at: String,
    pub done: bool,
    #[serde(default)]
    pub finished_at: Option<String>,
    pub total: u64,
    pub pending: u64,
    pub allowed: u64,
    pub held: u64,
    pub blocked: u64,
    pub failed: u64,
    pub skipped: u64,
    /// Why activating the version asks for confirmation (`None`: it does not).
    #[serde(default)]
    pub activation_concern: Option<String>,
}

/// One workspace's preview.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PreviewResult {
    /// `owner/name`.
    pub workspace: String,
    pub status: String,
    #[serde(default)]
    pub transition: Option<String>,
    #[serde(default)]
    pub decision: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    /// The guard's report (docs/plan-check.md).
    #[serde(default)]
    pub report: Option<serde_json::Value>,
    #[serde(default)]
    pub lint: Vec<PreviewLintLink>,
    #[serde(default)]
    pub started_at: Option<String>,
    #[serde(default)]
    pub finished_at: Option<String>,
}

/// A lint finding on the resource of a preview's protected change.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PreviewLintLink {
    pub address: String,
    pub rule: String,
    /// The attribute the finding is about; absent when it names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
}

/// A preview with all its results.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PreviewReport {
    pub preview: Preview,
    pub results: Vec<PreviewResult>,
}

/// A page of a preview's results (`GET .../previews/latest`): `preview`
/// is null, and `results` empty, when the version was never previewed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PreviewPage {
    pub preview: Option<Preview>,
    #[serde(default)]
    pub results: Vec<PreviewResult>,
    /// The cursor of the next page (null on the last).
    #[serde(default)]
    pub next: Option<String>,
}

/// The template lint's report (docs/lint.md, `schema_version` 1).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LintReport {
    pub schema_version: u32,
    pub errors: usize,
    pub warnings: usize,
    pub findings: Vec<LintFinding>,
    /// Why the server's lint could not read the files (then no findings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// One hazard the lint found.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LintFinding {
    /// The rule's id, e.g. `persistent-identity-mutable`.
    pub rule: String,
    /// `error` or `warning`.
    pub severity: String,
    pub file: String,
    pub line: u32,
    pub column: u32,
    pub resource: String,
    #[serde(default)]
    pub attribute: Option<String>,
    pub message: String,
    pub fix: String,
}

/// What the platform knows about a workspace's agent, apart from its builds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AgentInfo {
    pub status: String,
    #[serde(default)]
    pub lifecycle: Option<String>,
    #[serde(default)]
    pub last_heartbeat_at: Option<String>,
    #[serde(default)]
    pub connected_at: Option<String>,
    /// Why the agent is not usable, when its status does not say it (a
    /// failed startup script).
    #[serde(default)]
    pub reason: Option<String>,
}

impl Default for AgentInfo {
    fn default() -> Self {
        AgentInfo {
            status: "none".into(),
            lifecycle: None,
            last_heartbeat_at: None,
            connected_at: None,
            reason: None,
        }
    }
}

/// A workspace and its latest build.
///
/// `Report` is how its latest build's guard report is held and `Parameters`
/// how its parameters are: a client reads them as values
/// (`serde_json::Value`, strings by name); the server writes the JSON it
/// stores as it is (`Box<RawValue>`), without parsing and printing it again.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(bound(deserialize = "Report: Deserialize<'de>, Parameters: Deserialize<'de> + Default"))]
pub struct Workspace<Report = serde_json::Value, Parameters = BTreeMap<String, String>> {
    pub id: String,
    pub name: String,
    pub owner: String,
    pub template: String,
    pub template_version: u64,
    #[serde(default)]
    pub parameters: Parameters,
    /// The preset the workspace was created with, if any.
    #[serde(default)]
    pub preset: Option<String>,
    pub status: String,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub updated_at: Option<String>,
    #[serde(default)]
    pub latest_build: Option<Build<Report>>,
    #[serde(default)]
    pub agent: AgentInfo,
    #[serde(default)]
    pub healthy: bool,
    /// A build whose provisioner was lost still holds the state lock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locked_by_lost_holder: Option<LostLock>,
    /// The host its volumes and processes are on (a server's id, or an
    /// external daemon's): only that host's provisioners build it. `null`:
    /// any provisioner does.
    #[serde(default)]
    pub host: Option<String>,
    /// Its template's deprecation, when it is deprecated (`GET` of one
    /// workspace): the workspace keeps working, no new one is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_deprecation: Option<Deprecation>,
    /// In a person's own list: someone else's workspace shared with them
    /// (issue 49; `abode sharing`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

/// Answer to a workspace creation: the workspace and its first build
/// (`Report` and `Parameters` as in [`Workspace`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(bound(deserialize = "Report: Deserialize<'de>, Parameters: Deserialize<'de> + Default"))]
pub struct CreatedWorkspace<Report = serde_json::Value, Parameters = BTreeMap<String, String>> {
    pub workspace: Workspace<Report, Parameters>,
    pub build: Build<Report>,
}

/// `POST /workspaces/{ws}/orphan`: the workspace removed without Terraform
/// and the resources its last state names.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Orphaned {
    #[serde(default)]
    pub workspace: OrphanedWorkspace,
    pub resources: Vec<String>,
}

/// The workspace an orphaning removed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OrphanedWorkspace {
    pub id: String,
    pub name: String,
    pub owner: String,
    pub deleted: bool,
}

/// The state lock a lost holder keeps (`abode workspaces unlock`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LostLock {
    pub build_number: i64,
    pub holder: String,
    #[serde(default)]
    pub taken_at: Option<String>,
    #[serde(default)]
    pub lost_at: Option<String>,
}

/// `POST /workspaces/{ws}/unlock`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Unlocked {
    pub build_number: i64,
    pub holder: String,
    /// When the lock was taken and when its holder was lost (Unix ms).
    #[serde(default)]
    pub taken_at: Option<i64>,
    #[serde(default)]
    pub lost_at: Option<i64>,
}

/// `POST /workspaces/{ws}/move`'s answer: the host the workspace was on
/// (`null`: none) and the one it is on now.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Moved {
    pub from: Option<String>,
    pub to: String,
}

/// One start, stop or delete run of a workspace; `Report` is how its guard
/// report is held (see [`Workspace`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(bound(deserialize = "Report: Deserialize<'de>"))]
pub struct Build<Report = serde_json::Value> {
    pub id: String,
    pub workspace: String,
    #[serde(default)]
    pub owner: String,
    pub number: u64,
    pub transition: Transition,
    pub status: String,
    pub template_version: u64,
    #[serde(default)]
    pub initiator: Option<String>,
    /// `user`, or `system` for the server, the scheduler or prebuilds.
    #[serde(default)]
    pub initiator_type: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub started_at: Option<String>,
    #[serde(default)]
    pub finished_at: Option<String>,
    /// The plan guard's report (docs/plan-check.md), or null before the plan.
    #[serde(default)]
    pub guard: Option<Report>,
    /// SHA-256 of the saved plan of a held build: what a confirmation binds to.
    #[serde(default)]
    pub plan_digest: Option<String>,
    #[serde(default)]
    pub expires_at: Option<String>,
    #[serde(default)]
    pub confirmed_by: Option<String>,
    #[serde(default)]
    pub confirmed_at: Option<String>,
    /// What the workspace costs a day once this build's plan is applied
    /// (the `daily_cost` of its `abode_metadata`); absent before the plan
    /// is judged or when the plan does not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily_cost: Option<i64>,
    /// Why the build was refused before apply (`quota`), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// A rename's new name: the build plans under it, and the workspace
    /// takes it when the build succeeds (`POST .../rename`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rename_to: Option<String>,
    /// A restart's stop: a start of the workspace follows once it succeeds
    /// (`POST .../restart`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub then_start: bool,
    /// Why a pending build waits: no connected provisioner offers its
    /// version's tags (the line its log got). Absent otherwise, and in lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

impl<Report> Build<Report> {
    /// True once the build will not change any more on its own (it ended,
    /// or a person must confirm it).
    pub fn is_final(&self) -> bool {
        self.status
            .parse::<BuildStatus>()
            .is_ok_and(BuildStatus::is_at_rest)
    }
}

/// One line of a build's log.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LogLine {
    pub seq: u64,
    #[serde(default)]
    pub time: Option<String>,
    #[serde(default)]
    pub stage: String,
    #[serde(default)]
    pub level: String,
    pub text: String,
}

/// A page of log lines after a sequence number.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogPage {
    pub lines: Vec<LogLine>,
    /// The build's status when the page was read.
    pub status: BuildStatus,
    pub done: bool,
}

/// What an agent learns about itself from the server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentMe {
    #[serde(default)]
    pub workspace: String,
    #[serde(default)]
    pub owner: String,
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub heartbeat_interval_seconds: Option<u64>,
    /// How often the agent scans the home for unsaved work (and once at
    /// start); none: its own default.
    #[serde(default)]
    pub unsaved_scan_interval_seconds: Option<u64>,
    /// The `abode_agent`'s `startup_script` (run with `sh -c`), `dir` and `env`.
    #[serde(default)]
    pub startup_script: Option<String>,
    /// The `abode_agent`'s `claim_script`: run when a prebuilt workspace is claimed.
    #[serde(default)]
    pub claim_script: Option<String>,
    #[serde(default)]
    pub dir: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The agent's apps that have a health check, which it runs.
    #[serde(default)]
    pub apps: Vec<AgentApp>,
    /// Its `abode_script`s (start, stop and cron scripts).
    #[serde(default)]
    pub scripts: Vec<abode_contract::script::ScriptDefinition>,
    /// Its `metadata` blocks and resource monitors.
    #[serde(default)]
    pub watch: abode_contract::watch::AgentWatch,
}

/// One script of a workspace's agent and its latest run
/// (`GET /api/v1/workspaces/{owner}/{name}/scripts`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorkspaceScript {
    pub agent: String,
    pub display_name: String,
    /// `start`, `stop`, `cron` or the agent's own `startup_script`, as the
    /// script says (`start+cron`...).
    pub runs_on: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    #[serde(default)]
    pub start_blocks_login: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i64>,
    /// The latest run: `running`, `succeeded`, `failed`, `timed_out`,
    /// `not_run`; none before the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// A failed run's exit status (128 + N when killed by signal N).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// How many runs the agent has made of it since it started.
    #[serde(default)]
    pub runs: i64,
}

/// `GET /api/v1/workspaces/{owner}/{name}/scripts`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorkspaceScriptsAnswer {
    pub scripts: Vec<WorkspaceScript>,
}

/// The end of a script's latest output
/// (`GET /api/v1/workspaces/{owner}/{name}/scripts/log?agent=A&script=S`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ScriptLog {
    pub agent: String,
    pub display_name: String,
    pub log: String,
}

/// An app an agent checks (`abode_app` with a `healthcheck`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AgentApp {
    pub slug: String,
    pub healthcheck: abode_contract::apps::AppHealthcheck,
}

/// The server's answer to an agent's heartbeat: its workspace as it is now
/// (a claim changes the owner and name). An older server answers nothing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct AgentHeartbeat {
    #[serde(default)]
    pub workspace: String,
    #[serde(default)]
    pub owner: String,
    /// Someone asked for a fresh report of unsaved work: scan now.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scan_unsaved: bool,
    /// A stop, restart or delete waits for the agent's shutdown script:
    /// run it now (once per build) and report how it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shutdown: Option<AgentShutdown>,
}

/// A build's request that the agent run its shutdown script.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AgentShutdown {
    /// The build that waits (named again in the report).
    pub build: String,
    pub script: String,
    /// How long the script may run before the agent stops it.
    pub timeout_seconds: u64,
}

/// A resource address a workspace keeps protected across template versions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Protection {
    pub address: String,
    pub mode: String,
    #[serde(default)]
    pub updated_at: Option<String>,
}

/// One message of the caller's inbox.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Notification {
    pub id: String,
    pub kind: String,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub read: bool,
    #[serde(default)]
    pub read_at: Option<String>,
    /// The event's fields (docs/notifications.md).
    #[serde(default)]
    pub payload: serde_json::Value,
}

/// A delivery the server gave up on (owners' view).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailedNotification {
    pub id: String,
    pub kind: String,
    pub recipient: String,
    pub channel: String,
    pub attempts: i64,
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub payload: serde_json::Value,
}

/// One kind of notification in a person's settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NotificationSetting {
    pub kind: String,
    pub enabled: bool,
    #[serde(default)]
    pub mandatory: bool,
}

/// One entry of the connection log (`GET /connections`): a connection
/// into a workspace, who opened it, from where, its bytes and its end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConnectionLogEntry {
    pub id: String,
    /// The person (for an API token, its owner).
    pub user: String,
    /// The API token's name, when the connection was opened with one.
    #[serde(default)]
    pub token_name: Option<String>,
    /// `owner/name` when it opened.
    pub workspace: String,
    /// `ssh`, `port-forward`, `pty` or `app`.
    pub kind: String,
    #[serde(default)]
    pub app: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub client_ip: Option<String>,
    #[serde(default)]
    pub user_agent: Option<String>,
    /// RFC 3339.
    pub opened_at: String,
    /// RFC 3339; none while it is open.
    #[serde(default)]
    pub closed_at: Option<String>,
    pub bytes_to_workspace: u64,
    pub bytes_from_workspace: u64,
    /// `client_closed`, `agent_gone`, `idle`, `refused`, `interrupted`,
    /// `server_lost`; none while it is open.
    #[serde(default)]
    pub end_reason: Option<String>,
    /// The server that carried it (the one holding the agent's tunnel).
    pub server_id: String,
}

/// One entry of the audit log.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AuditEvent {
    pub id: serde_json::Value,
    #[serde(default)]
    pub time: Option<String>,
    #[serde(default)]
    pub actor: Option<String>,
    pub action: String,
    #[serde(default)]
    pub target_type: Option<String>,
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default)]
    pub outcome: Option<String>,
    #[serde(default)]
    pub request_id: Option<String>,
    #[serde(default)]
    pub details: Option<String>,
    /// The client address and user agent of the request that recorded it.
    #[serde(default)]
    pub client_ip: Option<String>,
    #[serde(default)]
    pub user_agent: Option<String>,
    /// The HTTP status the request was answered with.
    #[serde(default)]
    pub status_code: Option<u16>,
}

/// A named API token as listed: never the token itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ApiToken {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub last_used_at: Option<String>,
    #[serde(default)]
    pub expires_at: Option<String>,
    /// What the token may be used for, in its stored form: `all`, or grants
    /// separated by `;` (`template:push=web;workspace:build=ID`).
    #[serde(default)]
    pub scope: String,
}

/// Answer to a token creation, the one that carries the token. Not `Debug`:
/// it holds the token.
#[derive(Serialize, Deserialize)]
pub struct CreatedApiToken {
    pub api_token: ApiToken,
    pub token: String,
}

/// One pool of prebuilt workspaces (`GET /api/v1/prebuilds`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PrebuildPool {
    pub template: String,
    pub preset: String,
    pub version_id: String,
    pub desired: u64,
    pub running: u64,
    pub ready: u64,
    pub in_progress: u64,
    pub expired: u64,
    pub failed: u64,
    pub consecutive_failures: u64,
    pub hard_limited: bool,
    pub paused: bool,
    /// Unix ms.
    pub backing_off_until: Option<i64>,
    /// The `prebuilds` budget holds the pool below `desired`.
    #[serde(default)]
    pub quota_limited: bool,
    /// What one more prebuild is expected to cost a day; unknown until a
    /// prebuild build of the pool was costed.
    #[serde(default)]
    pub estimated_cost: Option<i64>,
    pub problem: Option<String>,
}

/// A template's lifecycle policy (`GET|PATCH /api/v1/templates/{name}/policy`).
/// Durations are milliseconds; 0 turns a rule off.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TemplatePolicy {
    pub template: String,
    pub default_ttl_ms: u64,
    pub activity_bump_ms: u64,
    pub max_ttl_ms: u64,
    /// `mon,tue,...`.
    pub autostart_days: String,
    pub allow_user_autostart: bool,
    pub allow_user_autostop: bool,
    pub failure_ttl_ms: u64,
    pub dormancy_threshold_ms: u64,
    pub dormancy_auto_deletion_ms: u64,
    pub require_active_version: bool,
    /// Whether its workspaces may be shared (`abode sharing`).
    #[serde(default = "yes")]
    pub allow_sharing: bool,
}

fn yes() -> bool {
    true
}

/// A change of a template's policy (`PATCH /api/v1/templates/{name}/policy`):
/// the fields given are set, the others kept; an unknown field is refused.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TemplatePolicyPatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_ttl_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity_bump_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ttl_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autostart_days: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_user_autostart: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_user_autostop: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_ttl_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dormancy_threshold_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dormancy_auto_deletion_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_active_version: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_sharing: Option<bool>,
}

impl TemplatePolicyPatch {
    /// Whether the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == TemplatePolicyPatch::default()
    }
}

/// An autostart schedule: a five-field cron in an IANA time zone (an
/// unknown field is refused: it is also part of a request).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Autostart {
    pub cron: String,
    pub timezone: String,
}

/// A workspace's schedule as its owner sets it (`PUT
/// /api/v1/workspaces/{ws}/schedule`: the whole of it).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    /// `None`: no autostart.
    #[serde(default)]
    pub autostart: Option<Autostart>,
    /// `None`: the template's default ttl; 0: no autostop (a max ttl still
    /// applies).
    #[serde(default)]
    pub ttl_ms: Option<u64>,
}

/// A workspace's schedule and lifecycle times (`GET
/// /api/v1/workspaces/{ws}/schedule`); times are Unix ms.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WorkspaceSchedule {
    pub workspace: String,
    pub autostart: Option<Autostart>,
    pub ttl_ms: Option<u64>,
    pub allow_user_autostart: bool,
    pub allow_user_autostop: bool,
    pub template_default_ttl_ms: u64,
    pub template_max_ttl_ms: u64,
    pub autostart_days: String,
    #[serde(default)]
    pub deadline: Option<i64>,
    #[serde(default)]
    pub max_deadline: Option<i64>,
    #[serde(default)]
    pub last_used_at: Option<i64>,
    #[serde(default)]
    pub dormant_at: Option<i64>,
    #[serde(default)]
    pub deleting_at: Option<i64>,
}

impl WorkspaceSchedule {
    /// The part of it its owner sets.
    pub fn spec(&self) -> ScheduleSpec {
        ScheduleSpec {
            autostart: self.autostart.clone(),
            ttl_ms: self.ttl_ms,
        }
    }
}

/// `{"user": ...}`: `GET /users/me`, a user's creation, a role change.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UserAnswer {
    pub user: User,
}

/// `{"template": ...}`: `GET /templates/{name}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TemplateAnswer {
    pub template: Template,
}

/// `{"workspace": ...}`: `GET /workspaces/{ws}` (`Report` and `Parameters`
/// as in [`Workspace`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(bound(deserialize = "Report: Deserialize<'de>, Parameters: Deserialize<'de> + Default"))]
pub struct WorkspaceAnswer<Report = serde_json::Value, Parameters = BTreeMap<String, String>> {
    pub workspace: Workspace<Report, Parameters>,
    /// The workspace's apps (`abode_app`), by agent and slug.
    #[serde(default)]
    pub apps: Vec<App>,
    /// The last report of unsaved work its agent sent, if one ever came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unsaved: Option<UnsavedReport>,
    /// What its agents last said of their home volume (docs/api.md, "Disk
    /// usage"), by agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disk: Vec<DiskUsage>,
    /// The latest value of each `metadata` block of its agents, as the
    /// server answering holds them in memory (docs/api.md, "Live metadata").
    #[serde(default)]
    pub metadata: Vec<AgentMetadata>,
}

/// The latest run of an agent's `metadata` block.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AgentMetadata {
    pub agent: String,
    pub key: String,
    pub display_name: String,
    /// Its output (at most 1 KiB), empty when it failed.
    pub value: String,
    /// Why the latest run failed (its exit status or timeout and the end of
    /// its output); none when it succeeded.
    #[serde(default)]
    pub error: Option<String>,
    /// When it ran (RFC 3339); none before its first report.
    #[serde(default)]
    pub collected_at: Option<String>,
    #[serde(default)]
    pub age_seconds: Option<u64>,
}

/// How full an agent's home volume was when it last said.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DiskUsage {
    pub agent: String,
    pub used_bytes: u64,
    pub total_bytes: u64,
    /// As `df` says it: used / (used + available to its user), rounded up.
    pub used_percent: u64,
    pub reported_at: String,
    pub age_seconds: u64,
}

/// What kind of unsaved work a repository holds (docs/api.md, "Unsaved
/// work").
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum UnsavedKind {
    /// Changes to tracked files, staged or not.
    Uncommitted,
    /// Files Git does not track and does not ignore.
    Untracked,
    /// Commits on a branch that no remote-tracking branch has.
    Unpushed,
    /// Stashed changes.
    Stashed,
}

impl UnsavedKind {
    pub fn as_str(self) -> &'static str {
        match self {
            UnsavedKind::Uncommitted => "uncommitted",
            UnsavedKind::Untracked => "untracked",
            UnsavedKind::Unpushed => "unpushed",
            UnsavedKind::Stashed => "stashed",
        }
    }
}

/// A Git repository with unsaved work, by its path relative to the
/// workspace's home (bytes that are not UTF-8 are shown as `\xNN`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct UnsavedRepository {
    pub path: String,
    pub kinds: Vec<UnsavedKind>,
}

/// The last report of unsaved work a workspace's agent sent: when it was
/// received, its age, its digest (what `--confirm-unsaved` names) and the
/// repositories with unsaved work.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct UnsavedReport {
    pub made_at: String,
    pub age_seconds: u64,
    pub digest: String,
    /// How many repositories the scan looked at (clean ones included).
    pub repositories_scanned: u64,
    /// The scan stopped at one of its bounds (depth, time, count): there
    /// may be more.
    #[serde(default)]
    pub truncated: bool,
    pub repositories: Vec<UnsavedRepository>,
}

/// A port of a workspace shared without a template change (`abode
/// port-share`, docs/apps.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PortShare {
    pub agent: String,
    pub port: u16,
    /// What it opens to now (never past the template's maximum).
    pub share: crate::apps::AppShare,
    /// Where it opens through the server (`None` when the server serves
    /// no apps).
    #[serde(default)]
    pub url: Option<String>,
}

/// `{"port_share": ...}`: a port's share as set (`PUT`), or null when the
/// port is not shared after all (`GET`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PortShareAnswer {
    pub port_share: Option<PortShare>,
}

/// `{"moved": ...}`: `POST /workspaces/{ws}/move`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MovedAnswer {
    pub moved: Moved,
}

/// `{"unlocked": ...}`: `POST /workspaces/{ws}/unlock`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UnlockedAnswer {
    pub unlocked: Unlocked,
}

/// `{"sessions_ended": n}`: `PUT /users/me/password`, how many of the
/// caller's other sessions the change ended.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct SessionsEnded {
    #[serde(default)]
    pub sessions_ended: u64,
}

/// `{"orphans": [...]}`: `GET /volumes/orphans`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OrphanVolumesAnswer {
    pub orphans: Vec<OrphanVolume>,
}

/// `{"port_shares": [...]}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PortSharesAnswer {
    pub port_shares: Vec<PortShare>,
}

/// `{"max": "authenticated"}`: how far a template's workspaces may share
/// ports.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TemplatePortShare {
    pub max: crate::apps::AppShare,
}

/// An app served from a workspace (docs/apps.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct App {
    pub agent: String,
    pub slug: String,
    #[serde(default)]
    pub display_name: Option<String>,
    /// Where it is opened through the server (the address its `subdomain`
    /// asks for when the server offers it, else the other); `None` when
    /// the server serves neither, or the app is a command.
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub path_url: Option<String>,
    #[serde(default)]
    pub subdomain_url: Option<String>,
    /// Where it answers inside the workspace (the template's `url`).
    #[serde(default)]
    pub internal_url: Option<String>,
    #[serde(default)]
    pub command: Option<String>,
    pub subdomain: bool,
    pub share: crate::apps::AppShare,
    pub health: crate::apps::AppHealth,
    pub open_in: crate::apps::AppOpenIn,
    #[serde(default)]
    pub icon: Option<String>,
    #[serde(default)]
    pub healthcheck: Option<crate::apps::AppHealthcheck>,
}

/// `{"build": ...}`: a build's start, reading, cancel or confirmation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildAnswer<Report = serde_json::Value> {
    pub build: Build<Report>,
}

/// `{"policy": ...}`: a template's lifecycle policy, read or changed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PolicyAnswer {
    pub policy: TemplatePolicy,
}

/// `{"schedule": ...}`: a workspace's schedule, read or changed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScheduleAnswer {
    pub schedule: WorkspaceSchedule,
}

/// `{"preview": ...}`: a fleet preview started.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PreviewAnswer {
    pub preview: Preview,
}

/// `{"versions": [...]}`: `GET /templates/{name}/versions`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VersionsAnswer {
    pub versions: Vec<TemplateVersion>,
}

/// `{"protections": [...]}`: what a workspace keeps protected.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProtectionsAnswer {
    pub protections: Vec<Protection>,
}

/// `{"released": ...}`: a protection released.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReleasedAnswer {
    pub released: Protection,
}

/// `{"notification": ...}`: a message marked read.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NotificationAnswer {
    pub notification: Notification,
}

/// `{"settings": [...]}`: the caller's notification settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NotificationSettingsAnswer {
    pub settings: Vec<NotificationSetting>,
}

/// `{"marked": n}`: how many messages were marked read.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MarkedAnswer {
    pub marked: u64,
}

/// `{"revoked": ...}`: an API token revoked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RevokedTokenAnswer {
    pub revoked: ApiToken,
}

/// A group (`GET /groups`, `GET /groups/{name}`; docs/api.md, "Groups").
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    #[serde(default)]
    pub display_name: String,
    /// `manual` (people keep its members) or `oidc` (group sync does).
    pub source: String,
    /// For quotas; 0: none.
    #[serde(default)]
    pub quota_allowance: i64,
    /// How many members it has (`Everyone`: every person).
    pub members: i64,
    /// The built-in `Everyone`: every person, not editable.
    #[serde(default)]
    pub built_in: bool,
    pub created_at: String,
}

/// A person's quota (`GET /users/{name}/quota`; docs/api.md, "Quotas"):
/// their budget, the sum of their groups' allowances, against what each of
/// their workspaces costs a day.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Quota {
    pub user: String,
    /// Whether the server refuses builds over budget (`--quota-enforce`).
    pub enforced: bool,
    /// The sum of `groups[].allowance`.
    pub budget: i64,
    /// The sum of `workspaces[].daily_cost`.
    pub spent: i64,
    /// `budget - spent` (negative when over, e.g. after an allowance was lowered).
    pub remaining: i64,
    pub groups: Vec<QuotaGroup>,
    pub workspaces: Vec<QuotaWorkspace>,
}

/// What a create would cost a day before it is queued
/// (`POST /templates/{name}/estimate`; docs/api.md, "Quotas"), and how it
/// sits in the caller's budget.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CreateEstimate {
    pub template: String,
    /// The version a create would build (the active one).
    pub version: i64,
    /// The preset the create would have (named, or matched by its values).
    pub preset: Option<String>,
    /// `import_plan` (the template's import plan with these values) or
    /// `prebuild_pool` (the last costed prebuild of the preset's pool).
    pub source: String,
    /// The total a day; `null` when it cannot be told (see `unknown`).
    pub daily_cost: Option<i64>,
    /// Each charged `abode_metadata` of the import plan.
    pub items: Vec<CostItem>,
    /// Why the cost cannot be told.
    pub unknown: Option<String>,
    /// Whether the server refuses builds over budget (`--quota-enforce`).
    pub enforced: bool,
    pub budget: i64,
    pub spent: i64,
    /// `budget - spent`, as in [`Quota`].
    pub remaining: i64,
    /// Whether the create fits; `null` when quotas are not enforced or the
    /// cost is unknown.
    pub fits: Option<bool>,
}

/// One charged `abode_metadata` of a plan.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CostItem {
    /// The metadata's instance address (`abode_metadata.compute[0]`).
    pub metadata: String,
    /// The resource it describes, when the configuration names one.
    pub resource: Option<String>,
    pub daily_cost: i64,
}

/// An external auth provider and whether the caller linked it
/// (`GET /external-auth`; docs/external-auth.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExternalAuthLink {
    /// The provider's id (`abode_external_auth "ID"`).
    pub provider: String,
    /// `github`, `gitlab`, `bitbucket` or `oauth2`.
    #[serde(rename = "type")]
    pub kind: String,
    pub linked: bool,
    /// When the caller linked it (RFC 3339).
    pub linked_at: Option<String>,
    /// When its access token expires (RFC 3339), when the provider said.
    pub expires_at: Option<String>,
}

/// `POST /external-auth/{id}/link`: where the person grants access.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExternalAuthStart {
    pub url: String,
    /// The device flow's code to type at `url` (a provider that offers only
    /// the device flow); absent for the code flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_code: Option<String>,
}

/// `DELETE /external-auth/{id}`: unlinked; `revocation` says why the
/// provider did not revoke the tokens, when it did not.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExternalAuthUnlinked {
    pub provider: String,
    pub revocation: Option<String>,
}

/// `POST /agent/external-auth/token`: a fresh token of the workspace's
/// owner, for Git (`username` and the token as its password). Its `Debug`
/// leaves the token out.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ExternalAuthToken {
    pub provider: String,
    pub username: String,
    pub access_token: String,
    pub expires_at: Option<String>,
}

impl std::fmt::Debug for ExternalAuthToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalAuthToken")
            .field("provider", &self.provider)
            .field("username", &self.username)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// A group's part of a budget.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct QuotaGroup {
    pub name: String,
    pub allowance: i64,
}

/// A workspace's part of what is spent: the daily cost of its newest build
/// that has one and did not fail or get canceled.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct QuotaWorkspace {
    pub name: String,
    pub build_number: i64,
    pub daily_cost: i64,
    /// The build is pending or running: its cost is reserved, not applied yet.
    pub reserved: bool,
}

/// A member of a group (`GET /groups/{name}/members`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct GroupMember {
    pub username: String,
    pub email: String,
    /// A system actor's account (`prebuilds`).
    #[serde(default)]
    pub system: bool,
}

/// One entry of a template's access list
/// (`GET /templates/{name}/permissions`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TemplatePermission {
    /// `user` or `group`.
    pub kind: String,
    pub name: String,
    /// `use` or `admin`.
    pub role: String,
}

/// A template's access list.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TemplatePermissions {
    pub template: String,
    pub permissions: Vec<TemplatePermission>,
}

/// A workspace's share list (`GET`/`PUT /workspaces/{ws}/sharing`), groups
/// then users, by name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkspaceSharing {
    /// `owner/name`.
    pub workspace: String,
    pub template: String,
    pub shares: Vec<WorkspaceShare>,
}

/// One entry of a workspace's share list.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkspaceShare {
    /// `user` or `group`.
    pub kind: String,
    pub name: String,
    /// `use` or `admin`.
    pub role: String,
    #[serde(default)]
    pub created_at: Option<String>,
}

/// A resource a workspace delete retained (`GET /retained`,
/// `GET /retained/{id}`; docs/api.md, "Retained resources"); its destroy
/// build's guard report a type parameter, as in [`Build`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(bound(deserialize = "Report: Deserialize<'de>"))]
pub struct RetainedResource<Report = serde_json::Value> {
    pub id: String,
    /// `pending` (its delete has not ended), `open`, `adopted`,
    /// `destroyed` or `void` (its delete left it in the workspace).
    pub status: String,
    pub address: String,
    pub resource_type: String,
    #[serde(default)]
    pub provider: String,
    /// What its provider imports it by (a volume: its name).
    #[serde(default)]
    pub import_id: String,
    /// Its attributes when it was retained, sensitive values hidden.
    #[serde(default)]
    pub attributes: serde_json::Value,
    pub owner: String,
    pub workspace: String,
    pub template: String,
    pub template_version: i64,
    /// The delete that retained it.
    pub build_id: String,
    pub retained_by: String,
    pub retained_at: String,
    #[serde(default)]
    pub expires_at: Option<String>,
    /// `hold` or `destroy`: what its expiry does.
    pub expire_action: String,
    #[serde(default)]
    pub closed_at: Option<String>,
    #[serde(default)]
    pub closed_by: Option<String>,
    /// The build destroying it (`abode retained destroy`, or its expiry),
    /// in `GET /retained/{id}` and the destroy's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destroy_build: Option<Build<Report>>,
    /// `resource` (what a delete retained) or `snapshot` (an archive of a
    /// volume's files taken before a confirmed destroy; `build_id` is the
    /// confirmed build).
    #[serde(default = "resource_kind")]
    pub kind: String,
    /// A snapshot's archive size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_bytes: Option<i64>,
}

fn resource_kind() -> String {
    "resource".to_string()
}

/// What `POST /retained/{id}/restore` wrote into a workspace's volume.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RestoredSnapshot {
    pub id: String,
    /// `owner/name`.
    pub workspace: String,
    /// The volume's name.
    pub volume: String,
    pub files: u64,
    pub dirs: u64,
    pub symlinks: u64,
    pub bytes: u64,
}

/// A directory of the server's volumes dir that no workspace's state and no
/// retained record knows (`GET /volumes/orphans`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct OrphanVolume {
    pub name: String,
    pub size_bytes: u64,
    pub modified_at: String,
}

/// Every error answer's body, `{"error":{"code":"...","message":"..."}}`
/// (docs/api.md, Errors): the API writes it, the client reads it, a server
/// relaying another's refusal reads it again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrorEnvelope {
    pub error: ErrorDetail,
}

/// What went wrong: a code of a fixed set and one line for people.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}

/// What a workspace uses (`abode stat`, docs/cli.md): read from its cgroup
/// v2 (`source` `cgroup`) or from /proc for its agent and every process the
/// agent started (`proc`), and `statvfs` of its home.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkspaceStat {
    pub source: String,
    pub cpu: StatCpu,
    pub memory: StatMemory,
    /// The home's filesystem; none when the home is not known.
    #[serde(default)]
    pub disk: Option<StatDisk>,
}

/// CPU over a short sample, in cores (1.0 is one core busy).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StatCpu {
    pub used_cores: f64,
    /// The cgroup's quota, else the machine's cores.
    pub limit_cores: f64,
}

/// Memory in use (a cgroup's working set, or the processes' resident
/// memory) and its limit (the cgroup's, else the machine's).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StatMemory {
    pub used_bytes: u64,
    pub limit_bytes: u64,
}

/// The filesystem the home is on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StatDisk {
    pub path: String,
    pub total_bytes: u64,
    pub used_bytes: u64,
    /// What an unprivileged user may still write.
    pub available_bytes: u64,
}

/// `{"timings": ...}`: `GET /workspaces/{ws}/builds/{n}/timings`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimingsAnswer {
    pub timings: BuildTimings,
}

/// What was measured of a build's time (issue 50): each stage that ran,
/// and each Terraform resource's plan and apply, ordered by start. A stage
/// that did not run is absent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildTimings {
    pub workspace: String,
    pub build: i64,
    pub status: BuildStatus,
    #[serde(default)]
    pub stages: Vec<StageTiming>,
    #[serde(default)]
    pub resources: Vec<ResourceTiming>,
}

/// One stage of a build: `queue_wait`, `setup`, `snapshot`, `init`, `plan`,
/// `guard`, `retain`, `quota`, `apply`, `state_write`, `agent_connected`,
/// `scripts` or `ready` (an instant: when the agent said so).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StageTiming {
    pub stage: String,
    /// The run it belongs to: `build`, `apply_saved_plan` (a confirmed
    /// plan's apply) or `agent` (its agent's stages, `agent` named).
    pub run: String,
    #[serde(default)]
    pub agent: Option<String>,
    pub started_at: String,
    /// None while it is under way.
    #[serde(default)]
    pub ended_at: Option<String>,
    /// Seconds from the build's first stage's start to this one's.
    pub offset_seconds: f64,
    /// Its length (microsecond precision); none while under way.
    #[serde(default)]
    pub seconds: Option<f64>,
}

/// One Terraform resource's time in a run's plan (`refresh`, a data
/// source's `read`) or apply (`create`, `update`, `delete`...), from
/// Terraform's own event timestamps.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ResourceTiming {
    pub run: String,
    /// `plan` or `apply`.
    pub phase: String,
    pub address: String,
    pub action: String,
    pub started_at: String,
    pub ended_at: String,
    pub offset_seconds: f64,
    pub seconds: f64,
}
