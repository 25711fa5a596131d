//! What each kind of API token scope covers (issue 49): the second half of
//! the policy. A token's scope only narrows its owner's rights: a request
//! passes when the scope covers its action *and* the owner's roles allow
//! it. Written out by hand in [`SCOPE_POLICY`]; `crates/api/tests/
//! token_scopes.rs` walks every route against it.
//!
//! A kind covers an action either for any object (`read`: every read) or
//! only for the objects the token names (`template:push` for its templates,
//! `workspace:*` for its workspaces, by id). A limited kind never covers a
//! request without a named object (a list): a `workspace:connect` token
//! cannot list workspaces.

use abode_store::{ScopeKind, TokenScope};

use crate::actions::{Action, Denied};
use Action::*;

/// How far a kind covers its actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// On any object the owner may act on.
    Any,
    /// Only on the objects the token names.
    Named,
}

/// The object a limited scope is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopedObject<'a> {
    /// A template, by name.
    Template(&'a str),
    /// A workspace, by id.
    Workspace(&'a str),
}

/// Every read the owner may make, except the Terraform state (it holds every
/// secret of the workspace: only `all` reads it) and previews (which plan).
const READS: &[Action] = &[
    UserReadSelf,
    TokenList,
    NotificationRead,
    UserList,
    TemplateRead,
    ProvisionerList,
    ProvisionerKeyList,
    GroupRead,
    QuotaRead,
    WorkspaceRead,
    PrebuildsRead,
    AuditRead,
];

/// The scope policy: for each kind, what it covers and how far.
pub const SCOPE_POLICY: &[(ScopeKind, Reach, &[Action])] = &[
    (ScopeKind::All, Reach::Any, &Action::ALL),
    (ScopeKind::Read, Reach::Any, READS),
    (ScopeKind::TemplatePush, Reach::Any, &[UserReadSelf]),
    (
        ScopeKind::TemplatePush,
        Reach::Named,
        &[TemplateRead, TemplatePush, TemplateActivate],
    ),
    (ScopeKind::WorkspaceConnect, Reach::Any, &[UserReadSelf]),
    (
        ScopeKind::WorkspaceConnect,
        Reach::Named,
        &[WorkspaceRead, WorkspaceConnect],
    ),
    // Starting or updating reads and uses the workspace's template.
    (
        ScopeKind::WorkspaceBuild,
        Reach::Any,
        &[UserReadSelf, TemplateRead, TemplateUse],
    ),
    (
        ScopeKind::WorkspaceBuild,
        Reach::Named,
        &[
            WorkspaceRead,
            WorkspaceStart,
            WorkspaceStop,
            WorkspaceUpdate,
            BuildCancel,
        ],
    ),
];

/// Whether `scope` covers `action` on `object` (`None`: no named object, or
/// every object, as a list asks). The refusal names the scope that would.
pub fn scope_permits(
    scope: &TokenScope,
    action: Action,
    object: Option<ScopedObject<'_>>,
) -> Result<(), Denied> {
    let covered = scope.grants().iter().any(|grant| {
        SCOPE_POLICY.iter().any(|(kind, reach, actions)| {
            *kind == grant.kind
                && actions.contains(&action)
                && match (reach, object) {
                    (Reach::Any, _) => true,
                    (Reach::Named, Some(ScopedObject::Template(name))) => {
                        grant.kind == ScopeKind::TemplatePush
                            && grant.objects.iter().any(|named| named == name)
                    }
                    (Reach::Named, Some(ScopedObject::Workspace(id))) => {
                        grant.kind != ScopeKind::TemplatePush
                            && grant.objects.iter().any(|named| named == id)
                    }
                    (Reach::Named, None) => false,
                }
        })
    });
    if covered {
        return Ok(());
    }
    let needed = match needed_scope(action) {
        ScopeKind::TemplatePush => match object {
            Some(ScopedObject::Template(name)) => format!("template:push for template \"{name}\""),
            _ => "all".to_string(),
        },
        kind @ (ScopeKind::WorkspaceConnect | ScopeKind::WorkspaceBuild) => match object {
            Some(ScopedObject::Workspace(_)) => format!("{kind} for this workspace"),
            _ => "all".to_string(),
        },
        kind => kind.to_string(),
    };
    Err(Denied {
        action,
        reason: format!(
            "this API token's scope ({scope}) does not allow {action}: that needs scope {needed}"
        ),
    })
}

/// Whether `scope` covers `action` on some object at all: asked before the
/// object a request names is looked up, so that a token that could never
/// act on it does not learn whether it exists.
pub fn scope_reaches(scope: &TokenScope, action: Action) -> Result<(), Denied> {
    let reaches = scope.grants().iter().any(|grant| {
        SCOPE_POLICY
            .iter()
            .any(|(kind, _, actions)| *kind == grant.kind && actions.contains(&action))
    });
    if reaches {
        Ok(())
    } else {
        scope_permits(scope, action, None)
    }
}

/// The narrowest kind that covers `action` (on a named object, for the
/// limited kinds).
pub fn needed_scope(action: Action) -> ScopeKind {
    [
        ScopeKind::Read,
        ScopeKind::TemplatePush,
        ScopeKind::WorkspaceConnect,
        ScopeKind::WorkspaceBuild,
    ]
    .into_iter()
    .find(|kind| {
        SCOPE_POLICY
            .iter()
            .any(|(listed, _, actions)| listed == kind && actions.contains(&action))
    })
    .unwrap_or(ScopeKind::All)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(text: &str) -> TokenScope {
        text.parse().unwrap()
    }

    /// Every action against every kind, written out by hand: `.` refused,
    /// `A` on any object, `N` on a named object only.
    #[test]
    fn the_scope_matrix() {
        #[rustfmt::skip]
        let expected: &[(Action, &str)] = &[
            //                          all read push conn build
            (UserReadSelf,             "A A A A A"),
            (SessionLogout,            "A . . . ."),
            (TokenCreate,              "A . . . ."),
            (TokenList,                "A A . . ."),
            (TokenRevoke,              "A . . . ."),
            (NotificationRead,         "A A . . ."),
            (NotificationPolicy,       "A . . . ."),
            (UserList,                 "A A . . ."),
            (UserCreate,               "A . . . ."),
            (UserChangeRoles,          "A . . . ."),
            (UserChangeStatus,         "A . . . ."),
            (TemplateRead,             "A A N . A"),
            (TemplateUse,              "A . . . A"),
            (TemplatePermissionsEdit,  "A . . . ."),
            (TemplatePush,             "A . N . ."),
            (TemplateActivate,         "A . N . ."),
            (TemplatePreview,          "A . . . ."),
            (ProvisionerList,          "A A . . ."),
            (ProvisionerKeyCreate,     "A . . . ."),
            (ProvisionerKeyList,       "A A . . ."),
            (ProvisionerKeyDelete,     "A . . . ."),
            (TemplatePolicyEdit,       "A . . . ."),
            (GroupRead,                "A A . . ."),
            (GroupManage,              "A . . . ."),
            (QuotaRead,                "A A . . ."),
            (WorkspaceRead,            "A A . N N"),
            (WorkspaceCreate,          "A . . . ."),
            (WorkspaceStart,           "A . . . N"),
            (WorkspaceStop,            "A . . . N"),
            (WorkspaceUpdate,          "A . . . N"),
            (WorkspaceDelete,          "A . . . ."),
            (BuildCancel,              "A . . . N"),
            (BuildConfirm,             "A . . . ."),
            (ProtectionRelease,        "A . . . ."),
            (WorkspaceScheduleEdit,    "A . . . ."),
            (WorkspaceOrphan,          "A . . . ."),
            (WorkspaceUnlock,          "A . . . ."),
            (WorkspaceMove,            "A . . . ."),
            (WorkspaceStateRead,       "A . . . ."),
            (WorkspaceConnect,         "A . . N ."),
            (WorkspaceShare,           "A . . . ."),
            (PrebuildsRead,            "A A . . ."),
            (PrebuildsPause,           "A . . . ."),
            (PrebuiltWorkspaceDelete,  "A . . . ."),
            (AuditRead,                "A A . . ."),
        ];
        assert_eq!(expected.len(), Action::ALL.len(), "every action has a row");
        let kinds = [
            scope("all"),
            scope("read"),
            scope("template:push=web"),
            scope("workspace:connect=w1"),
            scope("workspace:build=w1"),
        ];
        for (action, row) in expected {
            for (scope, cell) in kinds.iter().zip(row.split(' ')) {
                let object = match (scope.grants()[0].kind, action) {
                    (ScopeKind::TemplatePush, _) => ScopedObject::Template("web"),
                    _ => ScopedObject::Workspace("w1"),
                };
                let other = match object {
                    ScopedObject::Template(_) => ScopedObject::Template("api"),
                    ScopedObject::Workspace(_) => ScopedObject::Workspace("w2"),
                };
                let any = scope_permits(scope, *action, None).is_ok();
                let named = scope_permits(scope, *action, Some(object)).is_ok();
                let elsewhere = scope_permits(scope, *action, Some(other)).is_ok();
                let got = match (any, named, elsewhere) {
                    (true, true, true) => "A",
                    (false, true, false) => "N",
                    (false, false, false) => ".",
                    _ => "?",
                };
                assert_eq!(got, cell, "{action} under {scope}");
            }
        }
    }

    #[test]
    fn a_refusal_names_the_scope_that_would_allow_it() {
        let push = scope("template:push=web");
        let refused = scope_permits(&push, WorkspaceRead, None).unwrap_err();
        assert!(
            refused.reason.contains("needs scope read"),
            "{}",
            refused.reason
        );
        let refused =
            scope_permits(&push, TemplatePush, Some(ScopedObject::Template("api"))).unwrap_err();
        assert!(
            refused
                .reason
                .contains("needs scope template:push for template \"api\""),
            "{}",
            refused.reason
        );
        let refused = scope_permits(&scope("read"), WorkspaceStateRead, None).unwrap_err();
        assert!(
            refused.reason.contains("needs scope all"),
            "{}",
            refused.reason
        );
    }
}
