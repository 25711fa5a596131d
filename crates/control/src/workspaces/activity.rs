//! A workspace's use: its owner acting on it (a build, a cancel, a
//! schedule change), its agent reporting activity, a connection to it. Use
//! pushes the autostop deadline by the template's activity bump and keeps
//! the workspace from becoming dormant.

use std::time::Duration;

use abode_store::{Agent, Workspace};
use chrono::DateTime;

use super::Workspaces;
use crate::authz::Action;
use crate::{Caller, ControlError};

/// How often activity writes `last_used_at` (and bumps the deadline): once
/// a minute at most, so that reading a workspace does not write each time.
pub const ACTIVITY_THROTTLE: Duration = Duration::from_secs(60);

impl Workspaces {
    /// `POST /agent/activity`: something in the workspace is in use.
    pub async fn agent_activity(&self, agent: &Agent) -> Result<(), ControlError> {
        self.record_activity(&agent.workspace_id).await
    }

    /// The owner's request acting on their workspace (a build, a cancel, a
    /// schedule change...) counts as use. Reading it does not: a dashboard
    /// or a script polling `abode show` would otherwise keep every
    /// workspace running and never dormant, which is what the lifecycle
    /// exists to prevent; being in the workspace is reported by its agent.
    /// Bookkeeping must not fail the request: an error is logged.
    pub(crate) async fn note_owner_use(
        &self,
        caller: &Caller,
        workspace: &Workspace,
        action: Action,
    ) {
        if caller.user.id != workspace.owner_id
            || matches!(action, Action::WorkspaceRead | Action::WorkspaceStateRead)
        {
            return;
        }
        if let Err(error) = self.record_activity(&workspace.id).await {
            tracing::warn!(%error, workspace = %workspace.id, "cannot record workspace activity");
        }
    }

    /// Records use now (at most once per [`ACTIVITY_THROTTLE`]) and, when
    /// it did, pushes the deadline by the template's activity bump.
    pub async fn record_activity(&self, workspace_id: &str) -> Result<(), ControlError> {
        let now = self.inner.clock.now_ms();
        let older_than =
            now.saturating_sub(i64::try_from(ACTIVITY_THROTTLE.as_millis()).unwrap_or(i64::MAX));
        let store = &self.inner.store;
        if !store
            .record_workspace_use(workspace_id, now, older_than)
            .await?
        {
            return Ok(());
        }
        let stored = store.workspace_lifecycle(workspace_id).await?;
        if stored.deadline.is_none() {
            return Ok(());
        }
        let workspace = store.workspace_by_id(workspace_id).await?;
        let policy = store.template_policy(&workspace.template_id).await?;
        let bumped = abode_schedule::bump(
            stored.deadline.and_then(DateTime::from_timestamp_millis),
            stored
                .max_deadline
                .and_then(DateTime::from_timestamp_millis),
            DateTime::from_timestamp_millis(now).unwrap_or_default(),
            Duration::from_millis(u64::try_from(policy.activity_bump_ms).unwrap_or(0)),
        )
        .map(|deadline| deadline.timestamp_millis());
        if let Some(bumped) = bumped.filter(|bumped| Some(*bumped) != stored.deadline) {
            // Lost to a concurrent change: that one stands.
            store
                .push_workspace_deadline(workspace_id, stored.deadline, bumped)
                .await?;
        }
        Ok(())
    }
}
