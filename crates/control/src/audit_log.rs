//! The audit log as people read it: a page of events, filtered, with only
//! what the caller may see (`audit.read` on everyone's: owners and auditors;
//! others: their own workspaces, logins and tokens).

use abode_store::{page_size, AuditEvent, AuditFilter, Page, Store};

use crate::authz::{self, Action, Scope};
use crate::{Caller, ControlError, Workspaces};

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

/// The audit log as people read it; cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    store: Store,
    workspaces: Workspaces,
}

impl AuditLog {
    pub(crate) fn new(store: Store, workspaces: Workspaces) -> AuditLog {
        AuditLog { store, workspaces }
    }

    /// The audit log as the caller may see it (`audit.read` on everyone's:
    /// owners and auditors; others: their own workspaces, logins and tokens
    /// only), newest first.
    pub async fn events(
        &self,
        caller: &Caller,
        query: &AuditQuery,
    ) -> Result<Page<AuditEvent>, ControlError> {
        let (workspace_id, visible_to) =
            log_reach(&self.workspaces, caller, query.workspace.as_deref()).await?;
        Ok(self
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
                oldest_first: false,
            })
            .await?)
    }

    /// A page of an export of the whole audit log (owners and auditors:
    /// `audit.read` on everyone's), oldest first, from `since` (inclusive)
    /// to `until` (exclusive), after the cursor `after`.
    pub async fn export_page(
        &self,
        caller: &Caller,
        since: Option<i64>,
        until: Option<i64>,
        after: Option<String>,
    ) -> Result<Page<AuditEvent>, ControlError> {
        caller.authorize(Action::AuditRead, None)?;
        Ok(self
            .store
            .list_audit(&AuditFilter {
                since,
                until,
                after,
                limit: EXPORT_PAGE,
                oldest_first: true,
                ..AuditFilter::default()
            })
            .await?)
    }
}

/// Events an export reads at a time: its memory stays that of one page,
/// whatever the log's length.
const EXPORT_PAGE: i64 = 1000;

/// What a log (audit, connections) shows `caller`, asked of the workspace
/// `reference` or of all: that workspace's id, resolved as the caller sees
/// it, and whose entries only (none: everyone's, for `audit.read` on all).
pub async fn log_reach(
    workspaces: &Workspaces,
    caller: &Caller,
    reference: Option<&str>,
) -> Result<(Option<String>, Option<String>), ControlError> {
    let workspace_id = match reference {
        Some(reference) => Some(
            workspaces
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
    Ok((workspace_id, visible_to))
}
