//! Retained resources' expiries, on the scheduler's tick: their owners
//! are told a week before a record expires and when it has, and an expired
//! one's destroy is queued through the door as the `scheduler` system actor
//! (held for a person unless the template's rule says `expire = "destroy"`).

use abode_store::{BuildReason, RetainedResource, SystemActor, Transition};

use super::Scheduler;
use crate::builds::{BuildOrder, BuildTarget, VersionChoice};
use crate::{Actor, ControlError};

/// How long before a retained record expires its owner is told.
const WEEK_MS: i64 = 7 * 24 * 60 * 60 * 1000;

impl Scheduler {
    /// The scheduler's look at retained records: their owners are told a
    /// week before a record expires and when it has, and an expired one's
    /// destroy is queued. Returns how many messages were written.
    pub(crate) async fn retained_expiry_sweep(&self, now: i64) -> Result<usize, ControlError> {
        let mut written = 0;
        let mut after: Option<String> = None;
        loop {
            let page = self
                .inner
                .store
                .retained_expiring(now.saturating_add(WEEK_MS), after.as_deref(), 200)
                .await?;
            for record in &page.items {
                let Some(expires_at) = record.expires_at else {
                    continue;
                };
                let notices = self
                    .inner
                    .notifications
                    .retained_expiry_notices(record, expires_at, now)
                    .await;
                written += notices.len();
                self.inner.store.enqueue_notifications(&notices).await?;
                if expires_at <= now {
                    self.destroy_expired_retained(record).await;
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok(written),
            }
        }
    }

    /// The scheduler's expiry of a retained resource: its destroy, queued
    /// by the system (held for a person unless the template's rule says
    /// `expire = "destroy"`), once per expiry.
    pub(crate) async fn destroy_expired_retained(&self, record: &RetainedResource) {
        if record.destroy_build_id.is_some() {
            return;
        }
        // A snapshot is a file, not a resource: no build destroys it.
        if record.is_snapshot() {
            self.inner.retained.expire_snapshot(record).await;
            return;
        }
        let workspace = match self.inner.store.workspace_by_id(&record.workspace_id).await {
            Ok(workspace) => workspace,
            Err(error) => {
                tracing::error!(retained = %record.id, %error, "cannot read the workspace of an expired retained resource");
                return;
            }
        };
        let queued = self
            .inner
            .builds
            .request(
                BuildTarget::Retained {
                    workspace,
                    record: Box::new(record.clone()),
                },
                BuildOrder {
                    actor: Actor::System(SystemActor::Scheduler),
                    request_id: None,
                    transition: Transition::Delete,
                    version: VersionChoice::Current,
                    reason: BuildReason::RetainedExpired,
                    parameters: Default::default(),
                    retention: None,
                    rename_to: None,
                    then_start: false,
                },
            )
            .await;
        if let Err(error) = queued {
            tracing::warn!(retained = %record.id, %error, "cannot queue the destroy of an expired retained resource");
        }
    }
}
