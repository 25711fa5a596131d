//! Authorization in one place: who may do what, to whose objects.
//!
//! Every request the API serves names an [`Action`]; [`authorize`] answers it
//! for a [`Subject`] (a user with a set of roles, or a part of the system)
//! and the owner of the object acted on, from one table, [`POLICY`]. A grant
//! is for the actor's `Own` objects or for `Any` object (which includes their
//! own and objects nobody owns, such as templates). A new role or a new action
//! is a change to this table, and its tests say the whole matrix; the two
//! rules about the owner role kept elsewhere are below.
//!
//! Reading a workspace and acting on it are different actions: a
//! template-admin or an auditor reads every workspace, while acting on other
//! people's workspaces is the owner's (as in Coder).
//!
//! Roles hold exactly what they say: `member` is a role like the others, so
//! an account that only audits (`auditor` alone) changes nothing, and a person
//! who audits and has workspaces holds `auditor` and `member`. What every
//! signed-in user may do whatever their roles (their own session and tokens,
//! their own audit events) is granted to [`Grantee::AnyUser`].
//!
//! Templates have access lists: an entry (`use` or `admin`, for a user or
//! one of their groups) grants what the [`Grantee::Listed`] rows say, for
//! that template only, asked through [`authorize_template`]; a person who
//! may not read a template is told it does not exist.
//!
//! System actors act for the system on any workspace, each within its job:
//! the `scheduler` (autostart, autostop, dormancy, autodelete) starts, stops,
//! updates and deletes; `prebuilds` also creates (prebuilt workspaces); the
//! `server` cancels (a held build's expiry, a build a dead server left
//! behind). None of them confirms a held plan, releases a protection, orphans
//! a workspace, reads its state, or touches templates, users or the audit
//! log: those stay decisions of a person.
//!
//! Which credentials reach which subject is the API's business: agent tokens
//! authenticate the agent routes only and are no subject here; the routes
//! before login (`/health`, `/users/first`, `/login`) need none.
//!
//! API tokens may carry a scope (`token_scopes.rs`): it only narrows. A
//! user's subject holds the scope of the token they asked with, and every
//! answer here first asks the scope, then the roles.
//!
//! Workspaces have share lists (issue 49): an entry (`use` or `admin`, for a
//! user or one of their groups) grants what the [`Grantee::Shared`] rows
//! say, on that workspace only, asked through [`authorize_shared_workspace`]
//! with the caller's entry (read by the store through their groups). `use`
//! connects; `admin` also starts, stops, updates and cancels; neither
//! deletes, renames, schedules, reads the state or manages the sharing.
//!
//! Beside `authorize`: `widest_scope` for lists and the audit log, and
//! `roles_granted_any` (the roles that may do an action on anything: whom the
//! control plane tells of what only they can act on; the store reads the people
//! holding them with the roles given). `authorize_template` answers a template
//! action with the caller's entry on that template's list (`TemplateRole`, read
//! by the store through the person's groups and `Everyone`), through `Listed`
//! rows of the same table; `template_visibility` tells a list whether to filter
//! by access, in its query. Owners and template-admins hold the actions on
//! every template; the `prebuilds` and `scheduler` actors use every template.
//!
//! # What it keeps
//!
//! - A permission is a row of the table, whose expectations are written out by
//!   hand twice: this crate's tests (role x action x own/other) and
//!   `crates/api/tests/authz_matrix.rs` (every route x kind of caller, HTTP
//!   statuses). Two rules about the owner role live outside it, as rules of
//!   accounts rather than permissions: only an owner suspends or deletes an
//!   owner's account (`abode-identity`'s `accounts.rs`), and the last owner
//!   keeps `owner` (the store's `roles.rs`, under the lock role changes take).
//! - A person who may not read a template is told it does not exist: every
//!   template action asks `authorize_template` in the domain (the door for
//!   every new workspace, a create and a prebuild claim, checked before the
//!   claim picks a prebuild; previews; template policy), and a refused
//!   `TemplateRead` is `404 template "T" not found`, never `403` (a push
//!   without the right is the `403` a new name gets: either way the answer does
//!   not depend on the template existing). Lists of templates are filtered by
//!   access in their one query.
//! - Leaving a template's list never locks a person out of a workspace they
//!   already have: its start, stop, update and delete need no entry (the
//!   scheduler's autostart does not either).

pub use abode_store::{check_role_change, Role, RoleChange, RoleRefusal, Roles, UnknownRole};

pub use abode_store::{ScopeGrant, ScopeKind, ScopeObjects, TokenScope};
pub use abode_store::{ShareRole, SystemActor, TemplateRole};

mod actions;
mod token_scopes;
pub use actions::{Action, Denied};
pub use token_scopes::{
    needed_scope, scope_permits, scope_reaches, Reach, ScopedObject, SCOPE_POLICY,
};

/// Whose objects a grant covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Objects the actor owns.
    Own,
    /// Any object: the actor's, other people's, and those nobody owns.
    Any,
}

/// Who asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A signed-in user: their id (what "own" compares with an object's
    /// owner id), their roles, and the scope of the token they asked with
    /// (`all` for a session): see [`scope_permits`].
    User {
        id: String,
        roles: Roles,
        scope: TokenScope,
    },
    System(SystemActor),
}

impl Subject {
    pub fn user(id: impl Into<String>, roles: Roles) -> Subject {
        Subject::scoped(id, roles, TokenScope::all())
    }

    /// A user asking with a token of `scope`.
    pub fn scoped(id: impl Into<String>, roles: Roles, scope: TokenScope) -> Subject {
        Subject::User {
            id: id.into(),
            roles,
            scope,
        }
    }

    /// The scope's refusal, if it does not cover `action` on `object`.
    fn scope_permits(
        &self,
        action: Action,
        object: Option<ScopedObject<'_>>,
    ) -> Result<(), Denied> {
        match self {
            Subject::User { scope, .. } => scope_permits(scope, action, object),
            Subject::System(_) => Ok(()),
        }
    }
}

/// Whom a row of [`POLICY`] grants to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grantee {
    /// Users holding this role.
    Role(Role),
    /// Every signed-in user, whatever their roles.
    AnyUser,
    System(SystemActor),
    /// A user whom a template's access list gives at least this role, for
    /// that template only ([`authorize_template`]); no plain [`authorize`]
    /// meets it.
    Listed(TemplateRole),
    /// A user whom a workspace's share list gives at least this role, for
    /// that workspace only ([`authorize_shared_workspace`]); no plain
    /// [`authorize`] meets it.
    Shared(ShareRole),
}

impl Grantee {
    fn covers(self, subject: &Subject) -> bool {
        match (self, subject) {
            (Grantee::Role(role), Subject::User { roles, .. }) => roles.contains(role),
            (Grantee::AnyUser, Subject::User { .. }) => true,
            (Grantee::System(actor), Subject::System(asking)) => actor == *asking,
            (Grantee::Listed(_) | Grantee::Shared(_), _) => false,
            _ => false,
        }
    }
}

/// One row of the policy: `who` may do each of `actions` on objects within
/// `scope`.
#[derive(Debug, Clone, Copy)]
pub struct Grant {
    pub who: Grantee,
    pub scope: Scope,
    pub actions: &'static [Action],
}

use Action::*;

/// Member's workspace actions, which owners have on anyone's.
const OWN_WORKSPACES: &[Action] = &[
    WorkspaceRead,
    WorkspaceCreate,
    WorkspaceStart,
    WorkspaceStop,
    WorkspaceUpdate,
    WorkspaceDelete,
    BuildCancel,
    BuildConfirm,
    WorkspaceScheduleEdit,
    WorkspaceConnect,
    WorkspaceShare,
];

/// The whole policy. A subject may do an action on an object when a row
/// whose grantee covers the subject lists the action with scope `Any`, or
/// with scope `Own` and the object is the subject's.
pub const POLICY: &[Grant] = &[
    // owner: everything, on anyone's objects.
    Grant {
        who: Grantee::Role(Role::Owner),
        scope: Scope::Any,
        actions: &Action::ALL,
    },
    // template-admin: every template, whatever its access list, and reading
    // every workspace; acting on other people's workspaces is the owner's.
    // Releasing a protection stays theirs on their own workspaces (members
    // may not: a release is the way around the guard).
    Grant {
        who: Grantee::Role(Role::TemplateAdmin),
        scope: Scope::Any,
        actions: &[
            TemplateRead,
            TemplateUse,
            TemplatePermissionsEdit,
            GroupRead,
            TemplatePush,
            TemplateActivate,
            TemplatePreview,
            ProvisionerList,
            TemplatePolicyEdit,
            WorkspaceRead,
            WorkspaceUnlock,
            WorkspaceShare,
            PrebuildsRead,
            PrebuiltWorkspaceDelete,
        ],
    },
    Grant {
        who: Grantee::Role(Role::TemplateAdmin),
        scope: Scope::Own,
        actions: &[ProtectionRelease],
    },
    // user-admin: manages users, not templates (and grants no role but
    // member: see authorize_user_create).
    Grant {
        who: Grantee::Role(Role::UserAdmin),
        scope: Scope::Any,
        actions: &[
            UserList,
            UserCreate,
            UserChangeStatus,
            GroupRead,
            GroupManage,
            QuotaRead,
        ],
    },
    // auditor: reads the audit log and every workspace's status and builds;
    // changes nothing.
    Grant {
        who: Grantee::Role(Role::Auditor),
        scope: Scope::Any,
        actions: &[AuditRead, WorkspaceRead],
    },
    // member: their own workspaces.
    Grant {
        who: Grantee::Role(Role::Member),
        scope: Scope::Own,
        actions: OWN_WORKSPACES,
    },
    // every signed-in user: their own account, sessions, tokens and audit
    // events.
    Grant {
        who: Grantee::AnyUser,
        scope: Scope::Own,
        actions: &[
            UserReadSelf,
            SessionLogout,
            TokenCreate,
            TokenList,
            TokenRevoke,
            NotificationRead,
            AuditRead,
            QuotaRead,
        ],
    },
    // a template's access list: `use` sees it and builds from it; `admin`
    // also pushes and activates its versions and edits the list, without
    // the global template-admin role. A fleet preview is not theirs: it
    // plans every workspace of the template with its owner's state, whose
    // errors and reports a list admin may not read.
    Grant {
        who: Grantee::Listed(TemplateRole::Use),
        scope: Scope::Any,
        actions: &[TemplateRead, TemplateUse],
    },
    Grant {
        who: Grantee::Listed(TemplateRole::Admin),
        scope: Scope::Any,
        actions: &[TemplatePush, TemplateActivate, TemplatePermissionsEdit],
    },
    // a workspace's share list: `use` sees it and connects (SSH, port
    // forwards, the terminal, `owner` apps); `admin` also starts, stops,
    // restarts and updates it. Deleting, renaming, its schedule, its state
    // and its sharing stay its owner's.
    Grant {
        who: Grantee::Shared(ShareRole::Use),
        scope: Scope::Any,
        actions: &[WorkspaceRead, WorkspaceConnect],
    },
    Grant {
        who: Grantee::Shared(ShareRole::Admin),
        scope: Scope::Any,
        actions: &[WorkspaceStart, WorkspaceStop, WorkspaceUpdate, BuildCancel],
    },
    // The system, on any workspace, each part within its job.
    Grant {
        who: Grantee::System(SystemActor::Scheduler),
        scope: Scope::Any,
        actions: &[
            TemplateUse,
            WorkspaceRead,
            WorkspaceStart,
            WorkspaceStop,
            WorkspaceUpdate,
            WorkspaceDelete,
        ],
    },
    Grant {
        who: Grantee::System(SystemActor::Prebuilds),
        scope: Scope::Any,
        actions: &[
            TemplateRead,
            TemplateUse,
            WorkspaceRead,
            WorkspaceCreate,
            WorkspaceStart,
            WorkspaceStop,
            WorkspaceUpdate,
            WorkspaceDelete,
        ],
    },
    Grant {
        who: Grantee::System(SystemActor::Server),
        scope: Scope::Any,
        actions: &[WorkspaceRead, BuildCancel],
    },
];

/// Whether `actor` may do `action` on an object owned by the user whose id is
/// `object_owner`. `None` is an object nobody owns (a template) or a request
/// that covers everyone's objects (every workspace, the whole audit log):
/// only an `Any` grant allows it.
pub fn authorize(
    actor: &Subject,
    action: Action,
    object_owner: Option<&str>,
) -> Result<(), Denied> {
    actor.scope_permits(action, None)?;
    authorize_roles(actor, action, object_owner)
}

/// [`authorize`] for an action on the workspace `workspace_id`, which a
/// token's scope may name.
pub fn authorize_workspace(
    actor: &Subject,
    action: Action,
    object_owner: &str,
    workspace_id: &str,
) -> Result<(), Denied> {
    actor.scope_permits(action, Some(ScopedObject::Workspace(workspace_id)))?;
    authorize_roles(actor, action, Some(object_owner))
}

/// [`authorize_workspace`] for a caller whom the workspace's share list
/// gives `shared` (`None`: no entry): the roles first, then the
/// [`Grantee::Shared`] rows the entry meets. A refusal says the entry.
pub fn authorize_shared_workspace(
    actor: &Subject,
    action: Action,
    object_owner: &str,
    workspace_id: &str,
    shared: Option<ShareRole>,
) -> Result<(), Denied> {
    let by_roles = authorize_workspace(actor, action, object_owner, workspace_id);
    let Err(refused) = by_roles else {
        return Ok(());
    };
    let (Subject::User { .. }, Some(held)) = (actor, shared) else {
        return Err(refused);
    };
    // The scope's refusal stands: a share never widens a token.
    actor.scope_permits(action, Some(ScopedObject::Workspace(workspace_id)))?;
    if shared_grants(held, action) {
        return Ok(());
    }
    let (verb, object, _) = action.wording();
    let share = match least_shared_role(action) {
        Some(role) => format!(", or `{role}` on its share list"),
        None => String::new(),
    };
    Err(Denied {
        action,
        reason: format!(
            "you may not {verb} {object} that is not yours: that needs {}{share} (yours: {held}; {})",
            needed_roles(action, Scope::Any),
            held_by(actor)
        ),
    })
}

/// Whether a [`Grantee::Shared`] row that `held` meets grants `action`.
fn shared_grants(held: ShareRole, action: Action) -> bool {
    POLICY.iter().any(|grant| match grant.who {
        Grantee::Shared(needed) => held >= needed && grant.actions.contains(&action),
        _ => false,
    })
}

/// The least entry of a share list that grants `action`, if any.
fn least_shared_role(action: Action) -> Option<ShareRole> {
    ShareRole::ALL
        .into_iter()
        .find(|role| shared_grants(*role, action))
}

/// What the roles alone decide (the scope aside): before the workspace a
/// request names is looked up, whether the caller could act on others' at
/// all.
pub fn authorize_roles(
    actor: &Subject,
    action: Action,
    object_owner: Option<&str>,
) -> Result<(), Denied> {
    let own = match (actor, object_owner) {
        (Subject::User { id, .. }, Some(owner)) => id == owner,
        _ => false,
    };
    let needed = if own { Scope::Own } else { Scope::Any };
    if grants(actor, action, needed) {
        return Ok(());
    }
    Err(Denied {
        action,
        reason: refusal(actor, action, needed, object_owner.is_some()),
    })
}

/// What a request for an app served from a workspace may do (issue 33,
/// docs/apps.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppAccess {
    Allowed,
    /// Not signed in, and the app is not public: sign in, then ask again.
    SignInFirst,
    /// Signed in and not allowed: answered as if the app did not exist.
    Hidden,
}

/// Whether `actor` (`None`: a visitor who is not signed in) may open an app
/// shared at `share` from a workspace owned by `workspace_owner`: an
/// `owner` app is for those who may connect to the workspace
/// ([`Action::WorkspaceConnect`], from this table), an `authenticated` one
/// for anyone signed in, a `public` one for anyone. System actors open no
/// app.
pub fn authorize_app(
    actor: Option<&Subject>,
    share: abode_contract::apps::AppShare,
    workspace_owner: &str,
    shared: Option<ShareRole>,
) -> AppAccess {
    use abode_contract::apps::AppShare;
    match (actor, share) {
        (_, AppShare::Public) => AppAccess::Allowed,
        (None, _) => AppAccess::SignInFirst,
        (Some(Subject::System(_)), _) => AppAccess::Hidden,
        (Some(Subject::User { .. }), AppShare::Authenticated) => AppAccess::Allowed,
        (Some(actor), AppShare::Owner) => {
            let by_share = matches!(shared, Some(held) if shared_grants(held, Action::WorkspaceConnect))
                && actor.scope_permits(Action::WorkspaceConnect, None).is_ok();
            match authorize(actor, Action::WorkspaceConnect, Some(workspace_owner)) {
                Ok(()) => AppAccess::Allowed,
                Err(_) if by_share => AppAccess::Allowed,
                Err(_) => AppAccess::Hidden,
            }
        }
    }
}

/// The widest scope `actor` holds for `action`, if any: how a list decides
/// between everyone's rows (`Any`), the actor's (`Own`) and a refusal.
pub fn widest_scope(actor: &Subject, action: Action) -> Option<Scope> {
    if actor.scope_permits(action, None).is_err() {
        return None;
    }
    if grants(actor, action, Scope::Any) {
        Some(Scope::Any)
    } else if grants(actor, action, Scope::Own) {
        Some(Scope::Own)
    } else {
        None
    }
}

/// Whether `actor`, whom the template's access list gives `listed` (`None`:
/// no entry), may do `action` on that template: a grant of the action on
/// any object, or a [`Grantee::Listed`] row the entry meets. A person who
/// may not [`Action::TemplateRead`] it must be told it does not exist
/// ([`Denied::hides`]).
pub fn authorize_template(
    actor: &Subject,
    action: Action,
    template: &str,
    listed: Option<TemplateRole>,
) -> Result<(), Denied> {
    actor.scope_permits(action, Some(ScopedObject::Template(template)))?;
    if grants(actor, action, Scope::Any) || listed_grants(actor, action, listed) {
        return Ok(());
    }
    let reason = match (actor, least_listed_role(action)) {
        // Not told apart from a template that does not exist.
        (Subject::User { .. }, _) if action == Action::TemplateRead => {
            "template not found".to_string()
        }
        (Subject::User { .. }, Some(role)) => {
            let (verb, object, _) = action.wording();
            let entry = match listed {
                Some(held) => format!("yours: {held}"),
                None => "you have none".to_string(),
            };
            format!(
                "you may not {verb} {object}: that needs {}, or `{role}` on the template's access list ({entry}; {})",
                needed_roles(action, Scope::Any),
                held_by(actor)
            )
        }
        _ => refusal(actor, action, Scope::Any, false),
    };
    Err(Denied { action, reason })
}

/// Which templates a list shows `actor`: every one, or those whose access
/// list gives them a role (`None`: none at all, for a system actor without
/// the grant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateVisibility {
    All,
    Listed,
    None,
}

/// See [`TemplateVisibility`].
pub fn template_visibility(actor: &Subject) -> TemplateVisibility {
    if grants(actor, Action::TemplateRead, Scope::Any) {
        TemplateVisibility::All
    } else if matches!(actor, Subject::User { .. }) {
        TemplateVisibility::Listed
    } else {
        TemplateVisibility::None
    }
}

/// Whether a [`Grantee::Listed`] row that `listed` meets grants `action` to
/// a user.
fn listed_grants(actor: &Subject, action: Action, listed: Option<TemplateRole>) -> bool {
    let (Subject::User { .. }, Some(held)) = (actor, listed) else {
        return false;
    };
    POLICY.iter().any(|grant| match grant.who {
        Grantee::Listed(needed) => held >= needed && grant.actions.contains(&action),
        _ => false,
    })
}

/// The least entry of an access list that grants `action`, if any.
fn least_listed_role(action: Action) -> Option<TemplateRole> {
    TemplateRole::ALL.into_iter().find(|role| {
        POLICY
            .iter()
            .any(|grant| grant.who == Grantee::Listed(*role) && grant.actions.contains(&action))
    })
}

/// The roles that may do `action` on any object, in the table's order:
/// whom to tell about what only they can act on (a held build of anyone's
/// workspace, a template's pool).
pub fn roles_granted_any(action: Action) -> Vec<Role> {
    let mut roles = Vec::new();
    for grant in POLICY {
        if let Grantee::Role(role) = grant.who {
            if grant.scope == Scope::Any
                && grant.actions.contains(&action)
                && !roles.contains(&role)
            {
                roles.push(role);
            }
        }
    }
    roles
}

/// Whether `actor` may create a user holding `roles`: user-admins create
/// members; any other role is granted only by those who may change roles
/// (owners), so that nobody hands out more than they could themselves.
pub fn authorize_user_create(actor: &Subject, roles: &Roles) -> Result<(), Denied> {
    authorize(actor, Action::UserCreate, None)?;
    if *roles == Roles::from([Role::Member]) {
        return Ok(());
    }
    authorize(actor, Action::UserChangeRoles, None).map_err(|_| Denied {
        action: Action::UserCreate,
        reason: format!(
            "creating a user with roles other than member (here: {roles}) needs the owner role; {}",
            held_by(actor)
        ),
    })
}

/// Whether a row covering `actor` grants `action` for objects of `needed`.
fn grants(actor: &Subject, action: Action, needed: Scope) -> bool {
    POLICY.iter().any(|grant| {
        grant.who.covers(actor)
            && grant.actions.contains(&action)
            && (grant.scope == Scope::Any || needed == Scope::Own)
    })
}

fn held_by(actor: &Subject) -> String {
    match actor {
        Subject::User { roles, .. } => format!("your roles: {roles}"),
        Subject::System(system) => format!("the {system} acts for the system"),
    }
}

fn refusal(actor: &Subject, action: Action, needed: Scope, has_object_owner: bool) -> String {
    let (verb, object, plural) = action.wording();
    let what = match (needed, action.has_owner(), has_object_owner) {
        (Scope::Any, true, true) => format!("{verb} {object} that is not yours"),
        (Scope::Any, true, false) => format!("{verb} other users' {plural}"),
        _ => format!("{verb} {object}"),
    };
    match actor {
        Subject::System(system) => format!("the {system} may not {verb} {object}"),
        Subject::User { .. } => {
            let needs = match needed_roles(action, needed).as_str() {
                "" => "no role allows it".to_string(),
                roles => format!("that needs {roles}"),
            };
            format!("you may not {what}: {needs} ({})", held_by(actor))
        }
    }
}

/// "the owner role", "one of the roles owner, template-admin", or nothing:
/// the roles whose holders may do `action` on objects of `needed`.
fn needed_roles(action: Action, needed: Scope) -> String {
    let allowing: Vec<&str> = Role::ALL
        .into_iter()
        .filter(|role| {
            let holder = Subject::user("", Roles::from([*role]));
            grants(&holder, action, needed)
        })
        .map(Role::as_str)
        .collect();
    match allowing.as_slice() {
        [] => String::new(),
        [one] => format!("the {one} role"),
        many => format!("one of the roles {}", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// Columns of the expectation strings, in this order.
    const ROLES: [Role; 5] = [
        Role::Owner,
        Role::TemplateAdmin,
        Role::UserAdmin,
        Role::Auditor,
        Role::Member,
    ];

    /// The matrix, written by hand from the words and not from
    /// POLICY: for each action, which single-role user may do it on their own
    /// object and on someone else's (or everyone's), one character per role
    /// in the order of ROLES: `y` allowed, `.` refused.
    ///
    ///                          own      other's
    ///                          OTUAM    OTUAM
    const EXPECTED: &[(Action, &str, &str)] = &[
        (Action::UserReadSelf, "yyyyy", "y...."),
        (Action::SessionLogout, "yyyyy", "y...."),
        (Action::TokenCreate, "yyyyy", "y...."),
        (Action::TokenList, "yyyyy", "y...."),
        (Action::TokenRevoke, "yyyyy", "y...."),
        (Action::NotificationRead, "yyyyy", "y...."),
        (Action::NotificationPolicy, "y....", "y...."),
        (Action::UserList, "y.y..", "y.y.."),
        (Action::UserCreate, "y.y..", "y.y.."),
        (Action::UserChangeRoles, "y....", "y...."),
        (Action::UserChangeStatus, "y.y..", "y.y.."),
        (Action::TemplateRead, "yy...", "yy..."),
        (Action::TemplateUse, "yy...", "yy..."),
        (Action::TemplatePermissionsEdit, "yy...", "yy..."),
        (Action::TemplatePush, "yy...", "yy..."),
        (Action::TemplateActivate, "yy...", "yy..."),
        (Action::TemplatePreview, "yy...", "yy..."),
        (Action::ProvisionerList, "yy...", "yy..."),
        (Action::ProvisionerKeyCreate, "y....", "y...."),
        (Action::ProvisionerKeyList, "y....", "y...."),
        (Action::ProvisionerKeyDelete, "y....", "y...."),
        (Action::TemplatePolicyEdit, "yy...", "yy..."),
        (Action::GroupRead, "yyy..", "yyy.."),
        (Action::GroupManage, "y.y..", "y.y.."),
        (Action::QuotaRead, "yyyyy", "y.y.."),
        (Action::WorkspaceRead, "yy.yy", "yy.y."),
        (Action::WorkspaceCreate, "y...y", "y...."),
        (Action::WorkspaceStart, "y...y", "y...."),
        (Action::WorkspaceStop, "y...y", "y...."),
        (Action::WorkspaceUpdate, "y...y", "y...."),
        (Action::WorkspaceDelete, "y...y", "y...."),
        (Action::BuildCancel, "y...y", "y...."),
        (Action::BuildConfirm, "y...y", "y...."),
        (Action::ProtectionRelease, "yy...", "y...."),
        (Action::WorkspaceScheduleEdit, "y...y", "y...."),
        (Action::WorkspaceOrphan, "y....", "y...."),
        (Action::WorkspaceUnlock, "yy...", "yy..."),
        (Action::WorkspaceMove, "y....", "y...."),
        (Action::WorkspaceStateRead, "y....", "y...."),
        (Action::WorkspaceConnect, "y...y", "y...."),
        (Action::WorkspaceShare, "yy..y", "yy..."),
        (Action::PrebuildsRead, "yy...", "yy..."),
        (Action::PrebuildsPause, "y....", "y...."),
        (Action::PrebuiltWorkspaceDelete, "yy...", "yy..."),
        (Action::AuditRead, "yyyyy", "y..y."),
    ];

    /// What each system actor may do (on any workspace), by hand as well.
    /// Columns: scheduler, prebuilds, server.
    const EXPECTED_SYSTEM: &[(Action, &str)] = &[
        (Action::TemplateRead, ".y."),
        (Action::TemplateUse, "yy."),
        (Action::WorkspaceRead, "yyy"),
        (Action::WorkspaceCreate, ".y."),
        (Action::WorkspaceStart, "yy."),
        (Action::WorkspaceStop, "yy."),
        (Action::WorkspaceUpdate, "yy."),
        (Action::WorkspaceDelete, "yy."),
        (Action::BuildCancel, "..y"),
    ];

    fn allowed(flags: &str, column: usize) -> bool {
        match flags.as_bytes().get(column) {
            Some(b'y') => true,
            Some(b'.') => false,
            other => panic!("bad flag {other:?} in {flags:?}"),
        }
    }

    #[test]
    fn the_expectation_tables_cover_every_action_once() {
        let listed: Vec<Action> = EXPECTED.iter().map(|(action, _, _)| *action).collect();
        assert_eq!(listed, Action::ALL.to_vec());
        for (action, _) in EXPECTED_SYSTEM {
            assert_eq!(
                EXPECTED_SYSTEM.iter().filter(|(a, _)| a == action).count(),
                1,
                "{action}"
            );
        }
    }

    #[test]
    fn every_role_on_every_action_own_and_others() {
        for (action, own, others) in EXPECTED {
            for (column, role) in ROLES.into_iter().enumerate() {
                let alice = Subject::user("alice-id", Roles::from([role]));
                let cases = [
                    ("own", Some("alice-id"), allowed(own, column)),
                    ("another's", Some("bob-id"), allowed(others, column)),
                ];
                for (whose, owner, expected) in cases {
                    let answer = authorize(&alice, *action, owner);
                    assert_eq!(
                        answer.is_ok(),
                        expected,
                        "{role} doing {action} on {whose}: {answer:?}"
                    );
                }
                // Everyone's (a list of all, or an object nobody owns) is
                // what "another's" needs.
                assert_eq!(
                    authorize(&alice, *action, None).is_ok(),
                    allowed(others, column),
                    "{role} doing {action} on everyone's"
                );
            }
        }
    }

    #[test]
    fn system_actors_act_on_any_workspace_within_their_job_only() {
        for action in Action::ALL {
            let flags = EXPECTED_SYSTEM
                .iter()
                .find(|(listed, _)| *listed == action)
                .map_or("...", |(_, flags)| *flags);
            let columns = [
                SystemActor::Scheduler,
                SystemActor::Prebuilds,
                SystemActor::Server,
            ];
            for (column, system) in columns.into_iter().enumerate() {
                let actor = Subject::System(system);
                let expected = allowed(flags, column);
                for owner in [Some("bob-id"), None] {
                    let answer = authorize(&actor, action, owner);
                    assert_eq!(
                        answer.is_ok(),
                        expected,
                        "{system} doing {action}: {answer:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn roles_add_up_and_no_role_leaves_only_ones_own_account() {
        let auditing_member = Subject::user("a", Roles::from([Role::Auditor, Role::Member]));
        let cases = [
            (Action::WorkspaceRead, Some("b"), true),
            (Action::WorkspaceStop, Some("a"), true),
            (Action::WorkspaceStop, Some("b"), false),
            (Action::AuditRead, None, true),
            (Action::TemplatePush, None, false),
        ];
        for (action, owner, expected) in cases {
            assert_eq!(
                authorize(&auditing_member, action, owner).is_ok(),
                expected,
                "auditor+member doing {action} on {owner:?}"
            );
        }
        let nobody = Subject::user("n", Roles::new());
        for action in Action::ALL {
            let expected = matches!(
                action,
                Action::UserReadSelf
                    | Action::SessionLogout
                    | Action::TokenCreate
                    | Action::TokenList
                    | Action::TokenRevoke
                    | Action::NotificationRead
                    | Action::AuditRead
                    | Action::QuotaRead
            );
            assert_eq!(
                authorize(&nobody, action, Some("n")).is_ok(),
                expected,
                "{action}"
            );
        }
    }

    /// Callers of a template's actions, with what its access list gives
    /// them: the columns of [`EXPECTED_TEMPLATE`].
    fn template_callers() -> [(Roles, Option<TemplateRole>); 7] {
        let member = Roles::from([Role::Member]);
        [
            (member.clone(), None),
            (member.clone(), Some(TemplateRole::Use)),
            (member, Some(TemplateRole::Admin)),
            (Roles::from([Role::TemplateAdmin]), None),
            (Roles::from([Role::Owner]), None),
            (Roles::from([Role::Auditor]), Some(TemplateRole::Use)),
            (Roles::from([Role::UserAdmin]), None),
        ]
    }

    /// By hand: which caller may do each template action on one template.
    /// Columns: member not listed, member with `use`, member with `admin`,
    /// template-admin, owner, auditor with `use`, user-admin not listed.
    const EXPECTED_TEMPLATE: &[(Action, &str)] = &[
        (Action::TemplateRead, ".yyyyy."),
        (Action::TemplateUse, ".yyyyy."),
        (Action::TemplatePush, "..yyy.."),
        (Action::TemplateActivate, "..yyy.."),
        (Action::TemplatePreview, "...yy.."),
        (Action::TemplatePermissionsEdit, "..yyy.."),
        (Action::TemplatePolicyEdit, "...yy.."),
        (Action::ProvisionerList, "...yy.."),
    ];

    #[test]
    fn a_template_s_access_list_grants_its_use_and_admin() {
        for (action, flags) in EXPECTED_TEMPLATE {
            for (column, (roles, listed)) in template_callers().into_iter().enumerate() {
                let caller = Subject::user("c", roles.clone());
                let answer = authorize_template(&caller, *action, "t", listed);
                assert_eq!(
                    answer.is_ok(),
                    allowed(flags, column),
                    "{roles} listed {listed:?} doing {action}: {answer:?}"
                );
            }
        }
        // An entry counts for its template only: no plain check meets it.
        let listed_admin = Subject::user("c", Roles::from([Role::Member]));
        assert!(authorize(&listed_admin, Action::TemplatePush, None).is_err());
        // The system builds from every template, within its job.
        let cases = [
            (SystemActor::Prebuilds, Action::TemplateUse, true),
            (SystemActor::Scheduler, Action::TemplateUse, true),
            (SystemActor::Server, Action::TemplateUse, false),
            (SystemActor::Prebuilds, Action::TemplatePush, false),
        ];
        for (system, action, expected) in cases {
            let answer = authorize_template(&Subject::System(system), action, "t", None);
            assert_eq!(answer.is_ok(), expected, "{system} {action}");
        }
    }

    #[test]
    fn a_template_one_may_not_use_is_not_found_and_other_refusals_say_the_entry() {
        let member = Subject::user("m", Roles::from([Role::Member]));
        let cases = [
            (
                authorize_template(&member, Action::TemplateRead, "t", None),
                "template not found",
            ),
            (
                authorize_template(&member, Action::TemplatePush, "t", Some(TemplateRole::Use)),
                "you may not push templates: that needs one of the roles owner, template-admin, or `admin` on the template's access list (yours: use; your roles: member)",
            ),
            (
                authorize_template(&member, Action::TemplateUse, "t", None),
                "you may not use templates: that needs one of the roles owner, template-admin, or `use` on the template's access list (you have none; your roles: member)",
            ),
        ];
        for (answer, expected) in cases {
            assert_eq!(answer.unwrap_err().to_string(), expected);
        }
    }

    #[test]
    fn lists_show_every_template_to_template_admins_and_listed_ones_to_others() {
        let cases = [
            (Role::Owner, TemplateVisibility::All),
            (Role::TemplateAdmin, TemplateVisibility::All),
            (Role::Auditor, TemplateVisibility::Listed),
            (Role::Member, TemplateVisibility::Listed),
        ];
        for (role, expected) in cases {
            let actor = Subject::user("x", Roles::from([role]));
            assert_eq!(template_visibility(&actor), expected, "{role}");
        }
        let prebuilds = Subject::System(SystemActor::Prebuilds);
        assert_eq!(template_visibility(&prebuilds), TemplateVisibility::All);
        let server = Subject::System(SystemActor::Server);
        assert_eq!(template_visibility(&server), TemplateVisibility::None);
    }

    #[test]
    fn lists_get_the_widest_scope_held() {
        let cases = [
            (Role::Owner, Action::WorkspaceRead, Some(Scope::Any)),
            (Role::TemplateAdmin, Action::WorkspaceRead, Some(Scope::Any)),
            (Role::Auditor, Action::WorkspaceRead, Some(Scope::Any)),
            (Role::Member, Action::WorkspaceRead, Some(Scope::Own)),
            (Role::UserAdmin, Action::WorkspaceRead, None),
            (Role::Auditor, Action::AuditRead, Some(Scope::Any)),
            (Role::TemplateAdmin, Action::AuditRead, Some(Scope::Own)),
            (Role::Member, Action::UserList, None),
        ];
        for (role, action, expected) in cases {
            let actor = Subject::user("x", Roles::from([role]));
            assert_eq!(widest_scope(&actor, action), expected, "{role} {action}");
        }
    }

    #[test]
    fn only_owners_create_users_with_more_than_member() {
        let member = Roles::from([Role::Member]);
        let auditor = Roles::from([Role::Auditor, Role::Member]);
        // (creator's role, new user's roles, allowed)
        let cases = [
            (Role::Owner, &member, true),
            (Role::Owner, &auditor, true),
            (Role::UserAdmin, &member, true),
            (Role::UserAdmin, &auditor, false),
            (Role::TemplateAdmin, &member, false),
            (Role::Member, &member, false),
        ];
        for (creator, roles, expected) in cases {
            let actor = Subject::user("c", Roles::from([creator]));
            let answer = authorize_user_create(&actor, roles);
            assert_eq!(
                answer.is_ok(),
                expected,
                "{creator} creating {roles}: {answer:?}"
            );
        }
    }

    #[test]
    fn refusals_say_in_one_line_what_would_allow_it() {
        let member = Subject::user("m", Roles::from([Role::Member]));
        let auditor = Subject::user("a", Roles::from([Role::Auditor]));
        let cases = [
            (
                authorize(&member, Action::WorkspaceStop, Some("other")),
                "you may not stop a workspace that is not yours: that needs the owner role (your roles: member)",
            ),
            (
                authorize(&member, Action::WorkspaceRead, None),
                "you may not read other users' workspaces: that needs one of the roles owner, template-admin, auditor (your roles: member)",
            ),
            (
                authorize(&auditor, Action::WorkspaceStop, Some("a")),
                "you may not stop a workspace: that needs one of the roles owner, member (your roles: auditor)",
            ),
            (
                authorize(&member, Action::ProvisionerKeyCreate, None),
                "you may not create provisioner keys: that needs the owner role (your roles: member)",
            ),
            (
                authorize(&member, Action::TemplatePush, None),
                "you may not push templates: that needs one of the roles owner, template-admin (your roles: member)",
            ),
            (
                authorize(
                    &Subject::System(SystemActor::Scheduler),
                    Action::BuildConfirm,
                    Some("other"),
                ),
                "the scheduler may not confirm a held build",
            ),
            (
                authorize_user_create(
                    &Subject::user("u", Roles::from([Role::UserAdmin])),
                    &Roles::from([Role::Owner]),
                ),
                "creating a user with roles other than member (here: owner) needs the owner role; your roles: user-admin",
            ),
        ];
        for (answer, expected) in cases {
            let denied = answer.unwrap_err();
            assert_eq!(denied.to_string(), expected);
            assert!(!denied.reason.contains('\n'));
        }
    }

    #[test]
    fn template_admins_are_whoever_may_push_templates() {
        assert_eq!(
            roles_granted_any(Action::TemplatePush),
            vec![Role::Owner, Role::TemplateAdmin]
        );
        assert_eq!(
            roles_granted_any(Action::UserChangeRoles),
            vec![Role::Owner]
        );
    }

    #[test]
    fn the_last_owner_keeps_the_owner_role() {
        let owner = Roles::from([Role::Owner, Role::Member]);
        let member = Roles::from([Role::Member]);
        assert_eq!(
            check_role_change(&owner, &member, 1),
            Err(RoleRefusal::LastOwner)
        );
        assert_eq!(check_role_change(&owner, &member, 2), Ok(()));
    }

    /// By hand: what a member who does not own a workspace may do on it,
    /// by their entry on its share list. Columns: no entry, `use`, `admin`.
    const EXPECTED_SHARED: &[(Action, &str)] = &[
        (Action::WorkspaceRead, ".yy"),
        (Action::WorkspaceConnect, ".yy"),
        (Action::WorkspaceStart, "..y"),
        (Action::WorkspaceStop, "..y"),
        (Action::WorkspaceUpdate, "..y"),
        (Action::BuildCancel, "..y"),
        (Action::WorkspaceDelete, "..."),
        (Action::WorkspaceScheduleEdit, "..."),
        (Action::WorkspaceStateRead, "..."),
        (Action::WorkspaceShare, "..."),
        (Action::BuildConfirm, "..."),
        (Action::ProtectionRelease, "..."),
        (Action::WorkspaceOrphan, "..."),
        (Action::WorkspaceMove, "..."),
        (Action::WorkspaceUnlock, "..."),
        (Action::WorkspaceCreate, "..."),
    ];

    #[test]
    fn a_workspace_s_share_list_grants_use_and_admin_and_no_more() {
        let bob = Subject::user("bob-id", Roles::from([Role::Member]));
        let entries = [None, Some(ShareRole::Use), Some(ShareRole::Admin)];
        for (action, flags) in EXPECTED_SHARED {
            for (column, shared) in entries.into_iter().enumerate() {
                let answer = authorize_shared_workspace(&bob, *action, "alice-id", "w1", shared);
                assert_eq!(
                    answer.is_ok(),
                    allowed(flags, column),
                    "{shared:?} doing {action}: {answer:?}"
                );
            }
        }
        // Every action not in the table: no entry grants it.
        for action in Action::ALL {
            if EXPECTED_SHARED.iter().all(|(listed, _)| *listed != action) {
                let answer = authorize_shared_workspace(
                    &bob,
                    action,
                    "alice-id",
                    "w1",
                    Some(ShareRole::Admin),
                );
                assert!(answer.is_err(), "admin share doing {action}");
            }
        }
        // An entry counts for its workspace only: no plain check meets it.
        assert!(authorize(&bob, Action::WorkspaceConnect, Some("alice-id")).is_err());
        // A token's scope still narrows: a read token connects nowhere.
        let read: TokenScope = "read".parse().unwrap();
        let scoped = Subject::scoped("bob-id", Roles::from([Role::Member]), read);
        let answer = authorize_shared_workspace(
            &scoped,
            Action::WorkspaceConnect,
            "alice-id",
            "w1",
            Some(ShareRole::Admin),
        );
        assert!(answer.unwrap_err().to_string().contains("scope"));
        // The refusal says the entry, in one line.
        let denied = authorize_shared_workspace(
            &bob,
            Action::WorkspaceStop,
            "alice-id",
            "w1",
            Some(ShareRole::Use),
        )
        .unwrap_err();
        assert_eq!(
            denied.to_string(),
            "you may not stop a workspace that is not yours: that needs the owner role, or `admin` on its share list (yours: use; your roles: member)"
        );
        let denied = authorize_shared_workspace(
            &bob,
            Action::WorkspaceDelete,
            "alice-id",
            "w1",
            Some(ShareRole::Admin),
        )
        .unwrap_err();
        assert_eq!(
            denied.to_string(),
            "you may not delete a workspace that is not yours: that needs the owner role (yours: admin; your roles: member)"
        );
        // Owner apps open for a share that connects.
        use abode_contract::apps::AppShare::Owner;
        let shared = Some(ShareRole::Use);
        assert_eq!(
            authorize_app(Some(&bob), Owner, "alice-id", shared),
            AppAccess::Allowed
        );
        assert_eq!(
            authorize_app(Some(&bob), Owner, "alice-id", None),
            AppAccess::Hidden
        );
    }

    #[test]
    fn apps_by_share_level() {
        use abode_contract::apps::AppShare::{Authenticated, Owner, Public};
        let roles = |names: &str| -> Roles { names.parse().unwrap() };
        let owner_of_it = Subject::user("u1", roles("member"));
        let another_member = Subject::user("u2", roles("member"));
        let platform_owner = Subject::user("u3", roles("owner"));
        let auditor = Subject::user("u4", roles("auditor"));
        let scheduler = Subject::System(SystemActor::Scheduler);
        let cases: [(Option<&Subject>, _, AppAccess); 13] = [
            (Some(&owner_of_it), Owner, AppAccess::Allowed),
            (Some(&platform_owner), Owner, AppAccess::Allowed),
            (Some(&another_member), Owner, AppAccess::Hidden),
            (Some(&auditor), Owner, AppAccess::Hidden),
            (None, Owner, AppAccess::SignInFirst),
            (Some(&scheduler), Owner, AppAccess::Hidden),
            (Some(&another_member), Authenticated, AppAccess::Allowed),
            (Some(&auditor), Authenticated, AppAccess::Allowed),
            (None, Authenticated, AppAccess::SignInFirst),
            (Some(&scheduler), Authenticated, AppAccess::Hidden),
            (Some(&another_member), Public, AppAccess::Allowed),
            (None, Public, AppAccess::Allowed),
            (Some(&owner_of_it), Public, AppAccess::Allowed),
        ];
        for (actor, share, expected) in cases {
            assert_eq!(
                authorize_app(actor, share, "u1", None),
                expected,
                "{actor:?} {share:?}"
            );
        }
    }
}
