//! Retained resources as people see and change them (issue 32): list and
//! show, hand to another owner, keep longer, and reserve for a new
//! workspace to adopt. What a delete retains and how a build imports is
//! the build's side (`provisioner/retain_step.rs`).
//!
//! Who may do what, through the one authorization table: reading a record
//! is reading a workspace of its owner; exporting a volume's files is
//! connecting to one (a shell reads the same files); keeping it longer is
//! updating one;
//! handing it to someone else is deleting one of the owner's and creating
//! one for the new owner (so only owners hand records between people); a
//! record is adopted only by its owner.

use abode_authz::Action;
use abode_identity::audit::{audit_event, Audit};
use abode_identity::Caller;
use abode_store::{Build, Page, RetainedResource, RetainedStatus::Destroyed, Store, StoreError};

use abode_volume_archive::is_plain_name as plain_name;
use std::path::PathBuf;

use crate::{Clock, ControlError};

/// The retained resources service.
pub struct Retained {
    store: Store,
    clock: Clock,
    audit: Audit,
    /// This server's volumes dir: where the volumes of builds its embedded
    /// provisioners ran live.
    volumes_dir: PathBuf,
    /// This server's snapshots dir: the archives its provisioners took
    /// before confirmed destroys (issue 47).
    snapshots_dir: PathBuf,
}

/// A retained volume ready to be exported (`abode retained export`).
pub struct VolumeExport {
    pub record: RetainedResource,
    pub dir: PathBuf,
    pub meta: abode_volume_archive::ExportMeta,
    /// A snapshot's archive, sent as it is (it is an export already).
    pub archive: Option<PathBuf>,
}

/// What a restore wrote, and where.
pub struct Restored {
    pub record: RetainedResource,
    /// The volume's name.
    pub volume: String,
    pub summary: abode_volume_archive::RestoreSummary,
}

/// The longest a person may extend a record by in one go.
pub const MAX_EXTEND_MS: i64 = 10 * 366 * 86_400 * 1000;

fn not_found(id: &str) -> ControlError {
    ControlError::NotFound(format!("retained resource \"{id}\" not found"))
}

impl Retained {
    pub fn new(
        store: Store,
        clock: Clock,
        volumes_dir: PathBuf,
        snapshots_dir: PathBuf,
    ) -> Retained {
        Retained {
            audit: Audit::new(store.clone()),
            store,
            clock,
            volumes_dir,
            snapshots_dir,
        }
    }

    /// A snapshot's archive on this server's machine.
    fn snapshot_archive(&self, record: &RetainedResource) -> Result<PathBuf, ControlError> {
        let path = record
            .archive
            .as_deref()
            .filter(|name| plain_name(name))
            .map(|name| self.snapshots_dir.join(name));
        match path {
            Some(path) if path.is_file() => Ok(path),
            _ => Err(ControlError::NotFound(format!(
                "the archive of snapshot \"{}\" is not on this server's machine",
                record.id
            ))),
        }
    }

    /// Destroys a snapshot on purpose (`abode retained destroy ID`): its
    /// archive is removed and the record closed, audited. A snapshot is
    /// a copy of what a confirmed plan destroyed: no plan destroys it.
    pub async fn destroy_snapshot(
        &self,
        caller: &Caller,
        record: &RetainedResource,
    ) -> Result<RetainedResource, ControlError> {
        caller.authorize(Action::WorkspaceDelete, Some(&record.owner_id))?;
        if record.status != abode_store::RetainedStatus::Open {
            return Err(ControlError::Conflict(format!(
                "snapshot \"{}\" is {}: only an open record is destroyed",
                record.id, record.status
            )));
        }
        self.remove_archive(record).await?;
        self.store
            .close_retained(
                &record.id,
                abode_store::RetainedStatus::Destroyed,
                &caller.user.username,
                None,
            )
            .await?;
        self.record(
            caller,
            "retained.destroy",
            &record.id,
            format!("snapshot of {}", record.address),
        )
        .await;
        Ok(self.store.retained_by_id(&record.id).await?)
    }

    /// The scheduler's expiry of a snapshot: with `expire = "destroy"` its
    /// archive is removed and the record closed; with `hold` it stays until
    /// a person destroys it (its owner was told).
    pub async fn expire_snapshot(&self, record: &RetainedResource) {
        if record.expire_action != "destroy" {
            return;
        }
        if let Err(error) = self.remove_archive(record).await {
            tracing::warn!(retained = %record.id, %error, "cannot remove an expired snapshot's archive");
            return;
        }
        let closed = self
            .store
            .close_retained(&record.id, Destroyed, "scheduler", None);
        if let Err(error) = closed.await {
            tracing::warn!(retained = %record.id, %error, "cannot close an expired snapshot");
            return;
        }
        let what = format!("expired snapshot of {}", record.address);
        let event = audit_event(
            None,
            None,
            "retained.destroy",
            "retained_resource",
            &record.id,
            "success",
            Some(what),
        );
        self.audit.record(&event).await;
    }

    async fn remove_archive(&self, record: &RetainedResource) -> Result<(), ControlError> {
        let Some(name) = record.archive.as_deref().filter(|name| plain_name(name)) else {
            return Ok(());
        };
        match tokio::fs::remove_file(self.snapshots_dir.join(name)).await {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(ControlError::Internal(format!(
                "cannot remove the archive of snapshot \"{}\": {error}",
                record.id
            ))),
        }
    }

    /// Writes an open snapshot's files into the volume `volume` (a name in
    /// this server's volumes dir) of a stopped workspace, after checking the
    /// archive against its manifest; audited. The caller checked who may
    /// and that nothing runs in the workspace.
    pub(crate) async fn restore_into(
        &self,
        caller: &Caller,
        record: RetainedResource,
        workspace: &str,
        volume: &str,
    ) -> Result<Restored, ControlError> {
        let archive = self.snapshot_archive(&record)?;
        let dir = self.volumes_dir.join(volume);
        if !plain_name(volume) || !dir.is_dir() {
            return Err(ControlError::NotFound(format!(
                "the volume {volume} of {workspace} is not on this server's machine (an external provisioner keeps it on its own): export the snapshot (abode retained export {} --to FILE) and unpack its volume/ there",
                record.id
            )));
        }
        let id = record.id.clone();
        let summary = tokio::task::spawn_blocking(move || {
            abode_volume_archive::restore_verified(&archive, &dir)
        })
        .await
        .map_err(|error| ControlError::Internal(error.to_string()))?
        .map_err(|error| {
            ControlError::Internal(format!("snapshot \"{id}\" was not restored: {error}"))
        })?;
        self.record(
            caller,
            "retained.restore",
            &record.id,
            format!(
                "snapshot of {} into {workspace} (volume {volume}): {} files, {} bytes",
                record.address, summary.files, summary.bytes
            ),
        )
        .await;
        Ok(Restored {
            record,
            volume: volume.to_string(),
            summary,
        })
    }

    /// The directory of a retained `abode_volume` the caller may read, on
    /// this server's machine, for an export; audited.
    pub async fn volume_export(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<VolumeExport, ControlError> {
        let record = self.show(caller, id).await?;
        // A volume's files are what a shell in the workspace would read:
        // reading a record is not enough to take them away.
        caller.authorize(Action::WorkspaceConnect, Some(&record.owner_id))?;
        if record.is_snapshot() && record.status == abode_store::RetainedStatus::Open {
            let archive = self.snapshot_archive(&record)?;
            self.record(caller, "retained.export", id, record.address.clone())
                .await;
            return Ok(VolumeExport {
                dir: archive.clone(),
                archive: Some(archive),
                meta: abode_volume_archive::ExportMeta::default(),
                record,
            });
        }
        if record.resource_type != "abode_volume" {
            return Err(ControlError::BadRequest(format!(
                "retained resource \"{id}\" is {}: only an abode_volume can be exported",
                record.address
            )));
        }
        if record.status != abode_store::RetainedStatus::Open {
            return Err(ControlError::Conflict(format!(
                "retained resource \"{id}\" is {}: only an open record is exported",
                record.status
            )));
        }
        let name = record.import_id.as_str();
        let plain = plain_name(name);
        let dir = self.volumes_dir.join(name);
        if !plain || !dir.is_dir() {
            return Err(ControlError::NotFound(format!(
                "the volume of retained resource \"{id}\" is not on this server's machine \
                 (a build on an external provisioner keeps it on that provisioner's machine)"
            )));
        }
        self.record(caller, "retained.export", id, record.address.clone())
            .await;
        let meta = abode_volume_archive::ExportMeta {
            volume: name.to_string(),
            retained_id: record.id.clone(),
            workspace: record.workspace_name.clone(),
            owner: record.owner_name.clone(),
            exported_at: crate::times::utc_text(self.clock.now_ms()),
        };
        Ok(VolumeExport {
            record,
            dir,
            meta,
            archive: None,
        })
    }

    /// Directories of this server's volumes dir that no workspace's state
    /// and no held retained record knows (owners: it reads every state).
    pub async fn orphan_volumes(
        &self,
        caller: &Caller,
    ) -> Result<Vec<abode_volume_archive::Orphan>, ControlError> {
        caller.authorize(Action::WorkspaceStateRead, None)?;
        let mut known = std::collections::HashSet::new();
        let mut after: Option<String> = None;
        loop {
            let page = self.store.state_page(after.as_deref(), 100).await?;
            let Some((last, _)) = page.last() else { break };
            after = Some(last.clone());
            for (_, state) in &page {
                let Ok(state) = serde_json::from_slice::<serde_json::Value>(state) else {
                    continue;
                };
                for instance in crate::state::managed_instances(&state) {
                    if instance.resource_type == "abode_volume" {
                        if let Some(name) = instance
                            .object
                            .pointer("/attributes/name")
                            .and_then(serde_json::Value::as_str)
                        {
                            known.insert(name.to_string());
                        }
                    }
                }
            }
        }
        let mut after: Option<String> = None;
        loop {
            let page = self
                .store
                .list_retained_page(None, false, after.as_deref(), 500)
                .await?;
            for record in &page.items {
                if record.resource_type == "abode_volume" {
                    known.insert(record.import_id.clone());
                }
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let dir = self.volumes_dir.clone();
        tokio::task::spawn_blocking(move || abode_volume_archive::orphans(&dir, &known))
            .await
            .map_err(|error| ControlError::Internal(error.to_string()))?
            .or_else(|error| match error {
                // No volumes dir yet: nothing is orphaned.
                abode_volume_archive::ArchiveError::Io { .. } if !self.volumes_dir.exists() => {
                    Ok(Vec::new())
                }
                other => Err(ControlError::Internal(other.to_string())),
            })
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

    /// The build destroying `record`, if any, for a caller who may read
    /// the record (as `show` decides).
    pub async fn destroy_build(
        &self,
        caller: &Caller,
        record: &RetainedResource,
    ) -> Result<Option<Build>, ControlError> {
        if caller
            .authorize(Action::WorkspaceRead, Some(&record.owner_id))
            .is_err()
        {
            return Err(not_found(&record.id));
        }
        let Some(build_id) = &record.destroy_build_id else {
            return Ok(None);
        };
        Ok(Some(self.store.build_by_id(build_id).await?))
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
            if record.is_snapshot() {
                return Err(ControlError::BadRequest(format!(
                    "retained resource \"{id}\" is a snapshot (an archive of {}'s files), not a resource to adopt: create the workspace, stop it, then abode retained restore {id} --to WORKSPACE",
                    record.address
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
        let key = crate::retention::adopt_key(&caller.user.id, workspace_name);
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
