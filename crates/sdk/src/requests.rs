//! The bodies of the API's requests, as the client writes them and the
//! server reads them. What the server refuses (an unknown field, where a
//! body says so) is part of the type, so both sides see the same contract.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /login`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Login {
    pub username: String,
    pub password: String,
}

/// `POST /oidc/cli-token`: the one-time code a CLI's single sign-on ended
/// with, traded for a session.
#[derive(Clone, Serialize, Deserialize)]
pub struct OidcCode {
    pub code: String,
}

impl std::fmt::Debug for OidcCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OidcCode { .. }")
    }
}

/// `POST /users` and `POST /users/first`: a new account. Its roles are
/// `roles`, or the single `role` of older clients; neither: `member`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NewUser {
    pub username: String,
    pub email: String,
    pub password: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// `POST /workspaces/{workspace}/rename`: the workspace's new name. The
/// answer is the rename's build (`BuildAnswer`); the workspace takes the
/// name when that build succeeds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenameWorkspace {
    pub name: String,
}

/// `POST /templates/{name}/estimate`: the create to estimate, as
/// `POST /workspaces` would take it (without a name: the cost does not
/// depend on one).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EstimateCreate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    #[serde(default)]
    pub parameters: std::collections::BTreeMap<String, serde_json::Value>,
}

/// `POST /users/{name}/roles`: roles to add and to remove.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleChange {
    #[serde(default)]
    pub add: Vec<String>,
    #[serde(default)]
    pub remove: Vec<String>,
}

/// `PUT /users/me/password`: a person's own new password, given the
/// current one.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PasswordChange {
    pub current_password: String,
    pub password: String,
}

/// `POST /templates/{name}/versions/{n}/activate`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActivateVersion {
    /// The id of the version's latest preview, acknowledged: needed when
    /// that preview would hold or block workspaces or has not finished.
    #[serde(default)]
    pub acknowledge_preview: Option<String>,
}

/// `PUT /templates/{name}/deprecation`: deprecates a template (no new
/// workspaces; existing ones keep working).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeprecateTemplate {
    /// Why, as people creating a workspace are told (one line).
    pub message: String,
    /// The template to use instead.
    #[serde(default)]
    pub replacement: Option<String>,
}

/// `POST /workspaces/{ws}/builds/{n}/confirm`: the digest of the held plan
/// the confirmation binds to.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConfirmBuild {
    #[serde(default)]
    pub digest: Option<String>,
}

/// `POST /workspaces/{ws}/extend`: the new deadline is now + `duration_ms`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtendWorkspace {
    pub duration_ms: u64,
}

/// `POST /workspaces/{ws}/unlock`: the build whose lost lock is released.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Unlock {
    pub build: i64,
}

/// `POST /workspaces/{ws}/move`: the host the workspace's builds run on
/// from now on.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveWorkspace {
    pub host: String,
}

/// `POST /tokens`: a named API token, for `lifetime_seconds` or the
/// server's default.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewApiToken {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime_seconds: Option<u64>,
    /// `all` (the default when empty), `read`, `template:push`,
    /// `workspace:connect`, `workspace:build` (docs/api.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The templates `template:push` is limited to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub templates: Vec<String>,
    /// The workspaces (`NAME` or `OWNER/NAME`) the `workspace:*` scopes are
    /// limited to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workspaces: Vec<String>,
}

/// `POST /provisioner-keys`: a key for daemons with these tags
/// (`key=value`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewProvisionerKey {
    pub name: String,
    #[serde(default)]
    pub tags: Vec<String>,
}

/// `POST /notifications/settings`: kinds to turn off and on for the caller.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NotificationSettingsChange {
    #[serde(default)]
    pub disable: Vec<String>,
    #[serde(default)]
    pub enable: Vec<String>,
}

/// `POST /notifications/mandatory`: a kind made mandatory or optional.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MandatoryKind {
    pub kind: String,
    pub mandatory: bool,
}

/// `POST /agent/lifecycle`: the agent's state, and with `start_error` the
/// startup script's exit status.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentLifecycle {
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i64>,
}

/// `POST /agent/apps/health`: what an agent's check of one of its apps
/// found.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentAppHealth {
    pub slug: String,
    pub health: abode_contract::apps::AppHealth,
}

/// `POST /agent/unsaved`: what the agent's scan of the home found.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentUnsaved {
    pub repositories_scanned: u64,
    #[serde(default)]
    pub truncated: bool,
    pub repositories: Vec<crate::wire::UnsavedRepository>,
}

/// `POST /agent/heartbeat`'s body (optional: an empty body is a heartbeat
/// that says nothing more).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentHeartbeatReport {
    /// The home volume's usage (`statvfs` of the agent's `HOME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_disk: Option<HomeDisk>,
}

/// A volume's size and use, in bytes, as `df` counts them.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HomeDisk {
    pub total_bytes: u64,
    /// What its files take (total minus free).
    pub used_bytes: u64,
    /// What its user may still write (less than free by the reserved blocks).
    pub available_bytes: u64,
}

/// `POST /agent/shutdown`: how the shutdown script a build asked for ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentShutdownReport {
    pub build: String,
    /// `succeeded`, `failed`, `timed_out` or `not_run`.
    pub outcome: String,
    /// The exit status of a `failed` script (128 + N when killed by signal N).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i64>,
    /// The end of the script's output (at most 4 KiB).
    #[serde(default)]
    pub output: String,
}

/// `POST /agent/scripts`: a run of one of the agent's scripts, when it
/// starts, now and then while it runs, and when it ends.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentScriptReport {
    pub display_name: String,
    /// `running`, `succeeded`, `failed`, `timed_out` or `not_run`.
    pub state: String,
    /// The exit status of a `failed` run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i64>,
    /// The agent's count of this script's runs (1 for the first).
    pub run: i64,
    /// The end of the run's output (at most 64 KiB).
    #[serde(default)]
    pub log: String,
}

/// `POST /agent/external-auth/token`: the owner's token of a provider, by
/// its id or by a Git URL it serves (exactly one of the two).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentExternalAuthToken {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_url: Option<String>,
    /// Only the user name Git sends with the token (with `git_url`): no
    /// token is opened, refreshed or handed out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub username_only: bool,
}

/// `PUT /workspaces/{ws}/port-shares/{port}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharePort {
    pub share: abode_contract::apps::AppShare,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

/// `PUT /templates/{name}/port-share`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetTemplatePortShare {
    pub max: abode_contract::apps::AppShare,
}

/// `POST /groups`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewGroup {
    pub name: String,
    #[serde(default)]
    pub display_name: String,
    /// `manual` (the default) or `oidc`.
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub quota_allowance: i64,
}

/// `PATCH /groups/{name}`: what changes; an absent field keeps its value.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupEdit {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_allowance: Option<i64>,
}

/// `PATCH /groups/{name}/members`: usernames to add and to remove.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupMembersChange {
    #[serde(default)]
    pub add: Vec<String>,
    #[serde(default)]
    pub remove: Vec<String>,
}

/// `PUT /templates/{name}/permissions`: one entry, for a user or a group,
/// with role `use`, `admin` or `none` (removes the entry).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplatePermissionChange {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub role: String,
}

/// `PUT /workspaces/{ws}/sharing`: one entry of a workspace's share list,
/// for one `user` or one `group`; `role` is `use`, `admin`, or `none`
/// (removes the entry).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceShareChange {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub role: String,
}

/// `POST /retained/{id}/assign`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssignRetained {
    /// The new owner's username.
    pub user: String,
}

/// `POST /retained/{id}/restore`: a snapshot's files into a stopped
/// workspace's volume.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestoreRetained {
    /// The workspace: `name` or `owner/name`.
    pub to: String,
}

/// `POST /retained/{id}/extend`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtendRetained {
    /// How much longer: `30d`, `12h`, `90m`.
    pub by: String,
}

/// `POST /workspaces`: a workspace and its first (start) build, with a
/// preset's values or these `parameters`, importing retained resources
/// (`adopt`: their record ids).
#[derive(Debug, Clone, Serialize, Deserialize)]
// The name a body that is not an object is told of, as before the move.
#[serde(rename = "NewWorkspaceBody")]
pub struct NewWorkspace {
    pub name: String,
    pub template: String,
    /// A preset of the template's active version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    #[serde(default)]
    pub parameters: BTreeMap<String, Value>,
    /// Retained resources (record ids) the first build imports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adopt: Vec<String>,
}

/// `POST /workspaces/{ws}/builds`: a transition (`start`, `stop` or
/// `delete`, parsed by the server so an unknown one is told as such), the
/// version it plans (`template_version`, or `update`: the active one;
/// neither: the workspace's own), new parameter values and what a delete
/// retains (`rules`, the default, `all` or `none`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename = "NewBuildBody")]
pub struct NewBuild {
    pub transition: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_version: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<bool>,
    /// New parameter values for a start or an update.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain: Option<String>,
    /// A delete goes ahead although the last report shows unsaved work.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub discard_unsaved: bool,
    /// A delete goes ahead if the last report of unsaved work still has
    /// this digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm_unsaved: Option<String>,
}

/// `POST /templates/{name}/versions/{n}/previews`: the workspaces to
/// preview (`name` or `owner/name`); none: every live workspace not on the
/// version.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename = "PreviewBody", deny_unknown_fields)]
pub struct StartPreview {
    #[serde(default)]
    pub workspaces: Vec<String>,
}

/// `POST /retained/{id}/destroy`: queues the destroy, or with `digest` (of
/// the held destroy's plan) confirms it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename = "DestroyBody", deny_unknown_fields)]
pub struct DestroyRetained {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// The body of a `POST` that carries nothing: `{}`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Empty {}

/// `POST /agent/metadata`: the latest results of the agent's `metadata`
/// blocks and its monitors' readings (at most one report a second).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AgentMetadataReport {
    #[serde(default)]
    pub metadata: Vec<MetadataResult>,
    /// The workspace's memory in use, in percent (with a memory monitor).
    #[serde(default)]
    pub memory_used_percent: Option<f64>,
    #[serde(default)]
    pub volumes: Vec<VolumeReading>,
}

/// One `metadata` block's latest run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MetadataResult {
    pub key: String,
    #[serde(default)]
    pub value: String,
    #[serde(default)]
    pub error: Option<String>,
    /// How long ago it ran, in ms (the server dates it by its own clock).
    #[serde(default)]
    pub age_ms: u64,
}

/// A monitored volume's use, in percent.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VolumeReading {
    pub path: String,
    pub used_percent: f64,
}
