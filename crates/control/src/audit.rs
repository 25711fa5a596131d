//! The audit log: every change a person or the system makes is recorded
//! with who, what, on which target, the outcome and the request id; a member
//! reads only what concerns them.

use abode_store::{page_size, AuditEvent, AuditFilter, Build, NewAuditEvent, Page, SystemActor};

use crate::authz::{self, Action, Scope};
use crate::Actor;
use crate::Caller;
use crate::Control;
use crate::ControlError;
pub use abode_identity::audit::{audit_event, Audit};

/// Which audit events a page shows (docs/api.md, `GET /audit`).
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    /// A workspace reference (`name` or `owner/name`), resolved as the caller sees it.
    pub workspace: Option<String>,
    /// An exact target, whatever its type.
    pub target: Option<String>,
    pub actor: Option<String>,
    pub action: Option<String>,
    /// Unix ms, inclusive.
    pub since: Option<i64>,
    /// Unix ms, exclusive.
    pub until: Option<i64>,
    pub after: Option<String>,
    pub limit: Option<i64>,
}

impl Control {
    /// The audit log as the caller may see it (`audit.read` on everyone's:
    /// owners and auditors; others: their own workspaces, logins and tokens
    /// only), newest first.
    pub async fn audit_events(
        &self,
        caller: &Caller,
        query: &AuditQuery,
    ) -> Result<Page<AuditEvent>, ControlError> {
        let workspace_id = match &query.workspace {
            Some(reference) => Some(
                self.workspaces()
                    .resolve(caller, reference, Action::WorkspaceRead)
                    .await?
                    .id,
            ),
            None => None,
        };
        let visible_to = match authz::widest_scope(&caller.subject(), Action::AuditRead) {
            Some(Scope::Any) => None,
            _ => {
                caller.authorize(Action::AuditRead, Some(&caller.user.id))?;
                Some(caller.user.id.clone())
            }
        };
        Ok(self
            .inner
            .store
            .list_audit(&AuditFilter {
                workspace_id,
                visible_to,
                any_target: query.target.clone(),
                actor: query.actor.clone(),
                action: query.action.clone(),
                since: query.since,
                until: query.until,
                after: query.after.clone(),
                limit: page_size(query.limit),
            })
            .await?)
    }

    /// The audit event of a build the door accepted: who asked, why, for
    /// which transition and version.
    /// Records what a person did to a workspace, referring to it by id (its
    /// history follows it through renames and transfers).
    pub(crate) async fn audit_workspace(
        &self,
        caller: &Caller,
        workspace_id: &str,
        action: &str,
        target: &str,
        outcome: &str,
        details: Option<String>,
    ) {
        let event = workspace_event(caller, workspace_id, action, target, outcome, details);
        self.inner.audit.record(&event).await;
    }
}

/// What the server did to a build of a workspace, on the workspace's
/// record, as the server's system actor.
pub fn system_event(
    action: &str,
    build: &Build,
    details: Option<String>,
) -> (Actor, NewAuditEvent) {
    let mut event = audit_event(
        None,
        None,
        action,
        "workspace",
        &format!("{}/{}", build.owner_name, build.workspace_name),
        "success",
        details,
    );
    event.workspace_id = Some(build.workspace_id.clone());
    (Actor::System(SystemActor::Server), event)
}

/// What a person did to a workspace, referring to it by id (its history
/// follows it through renames and transfers).
pub fn workspace_event(
    caller: &Caller,
    workspace_id: &str,
    action: &str,
    target: &str,
    outcome: &str,
    details: Option<String>,
) -> NewAuditEvent {
    let mut event = audit_event(
        Some(&caller.user),
        caller.request_id.clone(),
        action,
        "workspace",
        target,
        outcome,
        details,
    );
    event.workspace_id = Some(workspace_id.to_string());
    event
}
