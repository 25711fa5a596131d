//! Retained resources as people see and change them (issue 32): list and
//! show, hand to another owner, keep longer, and reserve for a new
//! workspace to adopt. What a delete retains and how a build imports is
//! the build's side (`provisioner/retain_step.rs`).
//!
//! Who may do what, through the one authorization table: reading a record
//! is reading a workspace of its owner; keeping it longer is updating one;
//! handing it to someone else is deleting one of the owner's and creating
//! one for the new owner (so only owners hand records between people); a
//! record is adopted only by its owner.

use abode_authz::Action;
use abode_identity::audit::{audit_event, Audit};
use abode_identity::Caller;
use abode_store::{Page, RetainedResource, Store, StoreError};

use crate::{Clock, ControlError};

/// The retained resources service.
pub struct Retained {
    store: Store,
    clock: Clock,
    audit: Audit,
}

/// The longest a person may extend a record by in one go.
pub const MAX_EXTEND_MS: i64 = 10 * 366 * 86_400 * 1000;

fn not_found(id: &str) -> ControlError {
    ControlError::NotFound(format!("retained resource \"{id}\" not found"))
}

impl Retained {
    pub fn new(store: Store, clock: Clock) -> Retained {
        Retained {
            audit: Audit::new(store.clone()),
            store,
            clock,
        }
    }

    /// One record the caller may read; anything else is not found.
    pub async fn show(&self, caller: &Caller, id: &str) -> Result<RetainedResource, ControlError> {
        let record = match self.store.retained_by_id(id).await {
            Ok(record) => record,
            Err(StoreError::NotFound(_)) => return Err(not_found(id)),
            Err(other) => return Err(other.into()),
        };
        if caller
            .authorize(Action::WorkspaceRead, Some(&record.owner_id))
            .is_err()
        {
            return Err(not_found(id));
        }
        Ok(record)
    }

    /// The caller's records, or everyone's for those who may read every
    /// workspace (`everyone`).
    pub async fn list(
        &self,
        caller: &Caller,
        everyone: bool,
        include_closed: bool,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Page<RetainedResource>, ControlError> {
        let owner = if everyone {
            caller.authorize(Action::WorkspaceRead, None)?;
            None
        } else {
            Some(caller.user.id.as_str())
        };
        Ok(self
            .store
            .list_retained_page(owner, include_closed, after, limit)
            .await?)
    }

    /// Hands an open record to the person named `new_owner`.
    pub async fn assign(
        &self,
        caller: &Caller,
        id: &str,
        new_owner: &str,
    ) -> Result<RetainedResource, ControlError> {
        let record = self.show(caller, id).await?;
        let user = match self.store.user_by_name(new_owner).await {
            Ok(user) if !user.system => user,
            Ok(_) | Err(StoreError::NotFound(_)) => {
                return Err(ControlError::NotFound(format!(
                    "user \"{new_owner}\" not found"
                )))
            }
            Err(other) => return Err(other.into()),
        };
        let (new_owner_id, new_owner_name) = (user.id.as_str(), user.username.as_str());
        caller.authorize(Action::WorkspaceDelete, Some(&record.owner_id))?;
        caller.authorize(Action::WorkspaceCreate, Some(new_owner_id))?;
        let assigned = self.store.assign_retained(id, new_owner_id).await?;
        self.record(
            caller,
            "retained.assign",
            id,
            format!(
                "{} from {} to {new_owner_name}",
                record.address, record.owner_name
            ),
        )
        .await;
        Ok(assigned)
    }

    /// Keeps an open record `by_ms` longer than its expiry (or than now,
    /// for one that never expired... records without an expiry get one).
    pub async fn extend(
        &self,
        caller: &Caller,
        id: &str,
        by_ms: i64,
    ) -> Result<RetainedResource, ControlError> {
        if by_ms <= 0 || by_ms > MAX_EXTEND_MS {
            return Err(ControlError::BadRequest(
                "extend by a duration between 1 minute and 10 years (e.g. 30d)".into(),
            ));
        }
        let record = self.show(caller, id).await?;
        caller.authorize(Action::WorkspaceUpdate, Some(&record.owner_id))?;
        let now = self.clock.now_ms();
        let from = record.expires_at.unwrap_or(now).max(now);
        let extended = self
            .store
            .extend_retained(id, from.saturating_add(by_ms))
            .await?;
        self.record(
            caller,
            "retained.extend",
            id,
            format!(
                "{} until {}",
                record.address,
                crate::times::utc_text(from.saturating_add(by_ms))
            ),
        )
        .await;
        Ok(extended)
    }

    /// Reserves the caller's open records `ids` for their new workspace
    /// `workspace_name`, whose first build imports them; all or none.
    pub async fn reserve_for_adoption(
        &self,
        caller: &Caller,
        ids: &[String],
        workspace_name: &str,
    ) -> Result<Vec<RetainedResource>, ControlError> {
        let mut addresses: Vec<&str> = Vec::new();
        let mut records = Vec::new();
        for id in ids {
            let record = self.show(caller, id).await?;
            if record.owner_id != caller.user.id {
                return Err(ControlError::Forbidden(format!(
                    "retained resource \"{id}\" belongs to {}: only its owner adopts it (an owner can hand it over: abode retained assign)",
                    record.owner_name
                )));
            }
            if !record.status.is_held() || record.status == abode_store::RetainedStatus::Pending {
                return Err(ControlError::Conflict(format!(
                    "retained resource \"{id}\" is {}: only an open record can be adopted",
                    record.status
                )));
            }
            records.push(record);
        }
        for record in &records {
            if addresses.contains(&record.address.as_str()) {
                return Err(ControlError::BadRequest(format!(
                    "two retained resources go to {}: adopt one of them",
                    record.address
                )));
            }
            addresses.push(&record.address);
        }
        let key = crate::provisioner::adopt_key(&caller.user.id, workspace_name);
        match self
            .store
            .reserve_retained_for(ids, &caller.user.id, &key)
            .await
        {
            Ok(reserved) => Ok(reserved),
            Err(StoreError::NotFound(_)) => Err(ControlError::Conflict(
                "a retained resource changed while it was being reserved; try again".into(),
            )),
            Err(other) => Err(other.into()),
        }
    }

    async fn record(&self, caller: &Caller, action: &str, id: &str, details: String) {
        let event = audit_event(
            Some(&caller.user),
            caller.request_id.clone(),
            action,
            "retained_resource",
            id,
            "success",
            Some(details),
        );
        self.audit.record(&event).await;
    }
}
