//! The provisioners of every server on the database, for operators
//! (`abode provisioner list`): each with its tags, version, the job it runs
//! now and its last heartbeat, and whether that heartbeat is recent enough
//! for the server to be alive.

use abode_store::{page_size, Page, ProvisionerRow};

use crate::room::Host;
use abode_control::authz::Action;
use abode_control::Caller;
use abode_control::ControlError;

/// A provisioner as listed.
#[derive(Debug, Clone)]
pub struct ProvisionerView {
    pub row: ProvisionerRow,
    /// The tags it offers, as a JSON object's entries.
    pub tags: std::collections::BTreeMap<String, String>,
    /// No heartbeat for more than a job lease: its server stopped answering
    /// (its builds are salvaged once their leases run out).
    pub stale: bool,
}

impl Host {
    /// One page of every server's provisioners, by server and name.
    pub async fn list_provisioners(
        &self,
        caller: &Caller,
        after: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Page<ProvisionerView>, ControlError> {
        caller.authorize(Action::ProvisionerList, None)?;
        let page = self
            .inner
            .store
            .list_provisioner_page(after, page_size(limit))
            .await?;
        let lease_ms = i64::try_from(self.inner.config.job_lease.as_millis()).unwrap_or(i64::MAX);
        let now = self.now_ms();
        let items = page
            .items
            .into_iter()
            .map(|row| {
                let tags =
                    abode_control::tags::tags_of_json(&row.tags).map_err(ControlError::Internal)?;
                Ok(ProvisionerView {
                    stale: now.saturating_sub(row.last_beat_at) > lease_ms,
                    tags,
                    row,
                })
            })
            .collect::<Result<Vec<_>, ControlError>>()?;
        Ok(Page {
            items,
            next: page.next,
        })
    }
}
