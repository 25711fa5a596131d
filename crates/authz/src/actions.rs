//! The actions a subject can ask for, and the refusal: the vocabulary both
//! halves of the policy (roles in `lib.rs`, token scopes in
//! `token_scopes.rs`) are written in.

use std::fmt;

/// Everything a subject can ask to do through the API (or, for system
/// actors, from inside the server).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    // ---- one's own account ----
    /// `GET /users/me`.
    UserReadSelf,
    /// `POST /logout`: end the session the request carries.
    SessionLogout,
    /// `POST /tokens`.
    TokenCreate,
    /// `GET /tokens`.
    TokenList,
    /// `DELETE /tokens/{name}`.
    TokenRevoke,
    /// `GET /notifications`, `POST /notifications/{id}/read`,
    /// `POST /notifications/read-all`, `GET|POST /notifications/settings`:
    /// one's own inbox and preferences.
    NotificationRead,
    /// `POST /notifications/mandatory` (which kinds nobody can disable) and
    /// `GET /notifications/failed` (deliveries given up on, everyone's).
    NotificationPolicy,

    // ---- users ----
    /// `GET /users`.
    UserList,
    /// `POST /users` (with roles other than `member`, also
    /// [`Action::UserChangeRoles`]: see [`authorize_user_create`]).
    UserCreate,
    /// Changing anyone's roles (`abode users roles`).
    UserChangeRoles,
    /// Suspending, activating or deleting a person (`abode users
    /// suspend|activate|delete`); never one's own account, never the last
    /// owner (both checked by identity).
    UserChangeStatus,

    // ---- templates (nobody owns a template; its access list says who
    // uses it: see [`authorize_template`]) ----
    /// A template, its list, its versions. Refused as "not found": a person
    /// does not learn that a template they may not use exists.
    TemplateRead,
    /// Creating a workspace from a template, starting or updating one of
    /// its workspaces, claiming one of its prebuilt workspaces.
    TemplateUse,
    /// `PUT /templates/{name}/permissions`: a template's access list.
    TemplatePermissionsEdit,
    /// `POST /templates/{name}/versions`.
    TemplatePush,
    /// `POST /templates/{name}/versions/{n}/activate`.
    TemplateActivate,
    /// `POST /templates/{name}/versions/{n}/previews` and reading previews:
    /// a version planned against every workspace of the template (their
    /// names and what the guard would say), never applied.
    TemplatePreview,
    /// `GET /provisioners`: every server's provisioners, their heartbeat and
    /// the job each runs (which names workspaces).
    ProvisionerList,
    /// `POST /provisioner-keys`: a key an external provisioner daemon
    /// authenticates with, whose tags decide which builds it takes.
    ProvisionerKeyCreate,
    /// `GET /provisioner-keys`.
    ProvisionerKeyList,
    /// `DELETE /provisioner-keys/{name}`.
    ProvisionerKeyDelete,
    /// `PATCH /templates/{name}/policy`: the template's lifecycle policy
    /// (autostop, autostart days, dormancy).
    TemplatePolicyEdit,

    // ---- groups (nobody owns a group) ----
    /// `GET /groups`, a group and its members.
    GroupRead,
    /// Creating, editing and deleting groups, adding and removing members.
    GroupManage,

    // ---- quotas ----
    /// `GET /users/{user}/quota`: a person's budget (their groups'
    /// allowances) and what each of their workspaces costs a day.
    QuotaRead,

    // ---- workspaces ----
    /// A workspace's status, builds, logs and remembered protections.
    WorkspaceRead,
    /// A new workspace (own: for oneself).
    WorkspaceCreate,
    /// A `start` build at the workspace's version.
    WorkspaceStart,
    /// A `stop` build.
    WorkspaceStop,
    /// A `start` build at another version (`update`, `template_version`).
    WorkspaceUpdate,
    /// A `delete` build.
    WorkspaceDelete,
    /// Canceling a pending, running or held build.
    BuildCancel,
    /// Confirming a held build's saved plan.
    BuildConfirm,
    /// Releasing a remembered protection.
    ProtectionRelease,
    /// A workspace's schedule (`PUT /workspaces/{ws}/schedule`), extending
    /// its deadline and waking it from dormancy.
    WorkspaceScheduleEdit,
    /// Removing a workspace without running Terraform.
    WorkspaceOrphan,
    /// Releasing a workspace's state lock held by a build whose holder was
    /// lost (`abode workspaces unlock`), after checking that its Terraform
    /// no longer runs.
    WorkspaceUnlock,
    /// Moving a workspace to another host (`abode workspaces move`): its
    /// builds run there from then on, without the data its volumes hold.
    WorkspaceMove,
    /// Reading the Terraform state (it holds every secret of the workspace).
    WorkspaceStateRead,
    /// Opening a connection into a running workspace (`abode ssh`,
    /// `abode port-forward`): a shell as the workspace's user.
    WorkspaceConnect,
    /// Managing a workspace's share list (`abode sharing`): who else may
    /// connect to it, or also start and stop it.
    WorkspaceShare,

    // ---- prebuilt workspaces (the `prebuilds` system user owns them) ----
    /// `abode prebuilds status`: every pool's counts.
    PrebuildsRead,
    /// `abode prebuilds pause|resume`.
    PrebuildsPause,
    /// A `delete` build of a prebuilt workspace, without the right to delete
    /// people's workspaces.
    PrebuiltWorkspaceDelete,

    // ---- audit ----
    /// The audit log (own: events about one's workspaces, logins, tokens).
    AuditRead,
}

impl Action {
    /// Every action, in declaration order.
    pub const ALL: [Action; 45] = [
        Action::UserReadSelf,
        Action::SessionLogout,
        Action::TokenCreate,
        Action::TokenList,
        Action::TokenRevoke,
        Action::NotificationRead,
        Action::NotificationPolicy,
        Action::UserList,
        Action::UserCreate,
        Action::UserChangeRoles,
        Action::UserChangeStatus,
        Action::TemplateRead,
        Action::TemplateUse,
        Action::TemplatePermissionsEdit,
        Action::TemplatePush,
        Action::TemplateActivate,
        Action::TemplatePreview,
        Action::ProvisionerList,
        Action::ProvisionerKeyCreate,
        Action::ProvisionerKeyList,
        Action::ProvisionerKeyDelete,
        Action::TemplatePolicyEdit,
        Action::GroupRead,
        Action::GroupManage,
        Action::QuotaRead,
        Action::WorkspaceRead,
        Action::WorkspaceCreate,
        Action::WorkspaceStart,
        Action::WorkspaceStop,
        Action::WorkspaceUpdate,
        Action::WorkspaceDelete,
        Action::BuildCancel,
        Action::BuildConfirm,
        Action::ProtectionRelease,
        Action::WorkspaceScheduleEdit,
        Action::WorkspaceOrphan,
        Action::WorkspaceUnlock,
        Action::WorkspaceMove,
        Action::WorkspaceStateRead,
        Action::WorkspaceConnect,
        Action::WorkspaceShare,
        Action::PrebuildsRead,
        Action::PrebuildsPause,
        Action::PrebuiltWorkspaceDelete,
        Action::AuditRead,
    ];

    /// A stable name (logs, messages, tests).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::UserReadSelf => "user.read_self",
            Action::SessionLogout => "session.logout",
            Action::TokenCreate => "token.create",
            Action::TokenList => "token.list",
            Action::TokenRevoke => "token.revoke",
            Action::NotificationRead => "notification.read",
            Action::NotificationPolicy => "notification.policy",
            Action::UserList => "user.list",
            Action::UserCreate => "user.create",
            Action::UserChangeRoles => "user.change_roles",
            Action::UserChangeStatus => "user.change_status",
            Action::TemplateRead => "template.read",
            Action::TemplateUse => "template.use",
            Action::TemplatePermissionsEdit => "template.permissions_edit",
            Action::GroupRead => "group.read",
            Action::GroupManage => "group.manage",
            Action::QuotaRead => "quota.read",
            Action::TemplatePush => "template.push",
            Action::TemplateActivate => "template.activate",
            Action::TemplatePreview => "template.preview",
            Action::ProvisionerList => "provisioner.list",
            Action::ProvisionerKeyCreate => "provisioner_key.create",
            Action::ProvisionerKeyList => "provisioner_key.list",
            Action::ProvisionerKeyDelete => "provisioner_key.delete",
            Action::TemplatePolicyEdit => "template.policy_edit",
            Action::WorkspaceRead => "workspace.read",
            Action::WorkspaceCreate => "workspace.create",
            Action::WorkspaceStart => "workspace.start",
            Action::WorkspaceStop => "workspace.stop",
            Action::WorkspaceUpdate => "workspace.update",
            Action::WorkspaceDelete => "workspace.delete",
            Action::BuildCancel => "build.cancel",
            Action::BuildConfirm => "build.confirm",
            Action::ProtectionRelease => "protection.release",
            Action::WorkspaceScheduleEdit => "workspace.schedule_edit",
            Action::WorkspaceOrphan => "workspace.orphan",
            Action::WorkspaceUnlock => "workspace.unlock",
            Action::WorkspaceMove => "workspace.move",
            Action::WorkspaceStateRead => "workspace.state_read",
            Action::WorkspaceConnect => "workspace.connect",
            Action::WorkspaceShare => "workspace.share",
            Action::PrebuildsRead => "prebuilds.read",
            Action::PrebuildsPause => "prebuilds.pause",
            Action::PrebuiltWorkspaceDelete => "prebuilt_workspace.delete",
            Action::AuditRead => "audit.read",
        }
    }

    /// What a refusal says: (verb phrase, its object, the object in plural).
    pub(crate) fn wording(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Action::UserReadSelf => ("read", "a user's account", "accounts"),
            Action::SessionLogout => ("end", "a session", "sessions"),
            Action::TokenCreate => ("create", "an API token", "API tokens"),
            Action::TokenList => ("list", "API tokens", "API tokens"),
            Action::TokenRevoke => ("revoke", "an API token", "API tokens"),
            Action::NotificationRead => ("read", "notifications", "notifications"),
            Action::NotificationPolicy => {
                ("make mandatory", "notification kinds", "notification kinds")
            }
            Action::UserList => ("list", "users", "users"),
            Action::UserCreate => ("create", "users", "users"),
            Action::UserChangeRoles => ("change", "users' roles", "roles"),
            Action::UserChangeStatus => ("suspend, activate or delete", "users", "users"),
            Action::TemplateRead => ("read", "templates", "templates"),
            Action::TemplateUse => ("use", "templates", "templates"),
            Action::TemplatePermissionsEdit => {
                ("edit", "templates' access lists", "templates' access lists")
            }
            Action::GroupRead => ("read", "groups", "groups"),
            Action::GroupManage => ("manage", "groups", "groups"),
            Action::QuotaRead => ("read", "a quota", "quotas"),
            Action::TemplatePush => ("push", "templates", "templates"),
            Action::TemplateActivate => ("activate", "template versions", "template versions"),
            Action::TemplatePreview => ("preview", "template versions", "template versions"),
            Action::ProvisionerList => ("list", "provisioners", "provisioners"),
            Action::ProvisionerKeyCreate => ("create", "provisioner keys", "provisioner keys"),
            Action::ProvisionerKeyList => ("list", "provisioner keys", "provisioner keys"),
            Action::ProvisionerKeyDelete => ("delete", "provisioner keys", "provisioner keys"),
            Action::TemplatePolicyEdit => (
                "edit",
                "templates' lifecycle policy",
                "templates' lifecycle policies",
            ),
            Action::WorkspaceRead => ("read", "a workspace", "workspaces"),
            Action::WorkspaceCreate => ("create", "a workspace", "workspaces"),
            Action::WorkspaceStart => ("start", "a workspace", "workspaces"),
            Action::WorkspaceStop => ("stop", "a workspace", "workspaces"),
            Action::WorkspaceUpdate => ("update", "a workspace", "workspaces"),
            Action::WorkspaceDelete => ("delete", "a workspace", "workspaces"),
            Action::BuildCancel => ("cancel", "a build", "builds"),
            Action::BuildConfirm => ("confirm", "a held build", "held builds"),
            Action::ProtectionRelease => ("release", "a protection", "protections"),
            Action::WorkspaceScheduleEdit => {
                ("change the schedule of", "a workspace", "workspaces")
            }
            Action::WorkspaceOrphan => ("remove without Terraform", "a workspace", "workspaces"),
            Action::WorkspaceUnlock => ("unlock the state of", "a workspace", "workspaces"),
            Action::WorkspaceMove => ("move to another host", "a workspace", "workspaces"),
            Action::WorkspaceStateRead => {
                ("read the Terraform state of", "a workspace", "workspaces")
            }
            Action::WorkspaceConnect => ("connect to", "a workspace", "workspaces"),
            Action::WorkspaceShare => ("manage the sharing of", "a workspace", "workspaces"),
            Action::PrebuildsRead => ("read", "the prebuild pools", "prebuild pools"),
            Action::PrebuildsPause => (
                "pause or resume",
                "the prebuilds reconciliation",
                "the prebuilds reconciliation",
            ),
            Action::PrebuiltWorkspaceDelete => {
                ("delete", "a prebuilt workspace", "prebuilt workspaces")
            }
            Action::AuditRead => ("read", "the audit log", "audit events"),
        }
    }

    /// Whether the action's objects belong to someone (a workspace, a
    /// token), so that "own" means something; templates and the user list
    /// belong to nobody.
    pub(crate) fn has_owner(self) -> bool {
        !matches!(
            self,
            Action::UserList
                | Action::UserCreate
                | Action::UserChangeRoles
                | Action::UserChangeStatus
                | Action::NotificationPolicy
                | Action::TemplateRead
                | Action::TemplateUse
                | Action::TemplatePermissionsEdit
                | Action::GroupRead
                | Action::GroupManage
                | Action::TemplatePush
                | Action::TemplateActivate
                | Action::TemplatePreview
                | Action::ProvisionerList
                | Action::ProvisionerKeyCreate
                | Action::ProvisionerKeyList
                | Action::ProvisionerKeyDelete
                | Action::TemplatePolicyEdit
                | Action::PrebuildsRead
                | Action::PrebuildsPause
        )
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal, with the one line that says why (and what would allow it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Denied {
    pub action: Action,
    pub reason: String,
}
