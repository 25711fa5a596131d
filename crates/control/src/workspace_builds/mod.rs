//! A person's builds of a workspace they name: a start, stop, update or
//! delete through the door, reading builds and their logs, and
//! cancellation. Each entry finds the workspace (and whether the caller may
//! act on it, `workspaces.rs`), then asks the service that owns the rest:
//! the door (`builds/`), the build log, held builds.

mod rename_restart;

use std::time::Duration;

use abode_runner::{LogLevel, LogStage};
use abode_store::{page_size, Build, BuildReason, BuildStatus, Page, Transition};

use crate::authz::Action;
use crate::builds::{BuildOrder, BuildRequest, BuildTarget, VersionChoice};
use crate::error::or_not_found;
use std::sync::Arc;

use abode_store::{Protection, Store};

use crate::audit::{workspace_event, Audit};
use crate::held::checked_digest;
use crate::retained::Retained;
use crate::{
    Actor, BuildLog, Builds, Caller, ControlError, Held, LogPage, Notifications, Workspaces,
};
use abode_store::{RetainedResource, RetainedStatus};

/// A person's builds of a workspace they name; cheap to clone.
#[derive(Clone)]
pub struct WorkspaceBuilds {
    inner: Arc<WorkspaceBuildsParts>,
}

/// What [`WorkspaceBuilds`] is made of.
pub(crate) struct WorkspaceBuildsParts {
    pub(crate) store: Store,
    pub(crate) workspaces: Workspaces,
    pub(crate) builds: Builds,
    pub(crate) build_log: BuildLog,
    pub(crate) held: Held,
    pub(crate) notifications: Notifications,
    pub(crate) retained: Arc<Retained>,
    pub(crate) audit: Audit,
    pub(crate) clock: abode_clock::Clock,
}

impl WorkspaceBuilds {
    pub(crate) fn new(parts: WorkspaceBuildsParts) -> WorkspaceBuilds {
        WorkspaceBuilds {
            inner: Arc::new(parts),
        }
    }

    fn workspaces(&self) -> &Workspaces {
        &self.inner.workspaces
    }

    fn builds(&self) -> &Builds {
        &self.inner.builds
    }

    fn build_log(&self) -> &BuildLog {
        &self.inner.build_log
    }

    fn held(&self) -> &Held {
        &self.inner.held
    }

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

impl WorkspaceBuilds {
    /// A person's start, stop, update or delete of a workspace they may act on.
    pub async fn request_transition(
        &self,
        caller: &Caller,
        reference: &str,
        request: &BuildRequest,
    ) -> Result<Build, ControlError> {
        let version = request.version;
        let action = match (request.transition, version) {
            (Transition::Stop, _) => Action::WorkspaceStop,
            (Transition::Delete, _) => Action::WorkspaceDelete,
            (Transition::Start, VersionChoice::Current) => Action::WorkspaceStart,
            (Transition::Start, _) => Action::WorkspaceUpdate,
        };
        let workspace = self.workspaces().resolve(caller, reference, action).await?;
        if request.retention == Some(abode_store::DeleteRetention::Nothing) {
            // Destroying what the template says to keep is an owner's call.
            caller.authorize(Action::ProtectionRelease, None)?;
        }
        if request.transition == Transition::Delete {
            self.judge_unsaved(caller, &workspace, &request.unsaved)
                .await?;
        }
        let workspace_id = workspace.id.clone();
        let build = self
            .builds()
            .request(
                BuildTarget::Existing(workspace),
                BuildOrder {
                    actor: Actor::User(caller.user.clone()),
                    request_id: caller.request_id.clone(),
                    transition: request.transition,
                    version,
                    reason: BuildReason::Initiator,
                    parameters: request.parameters.clone(),
                    retention: request.retention,
                    rename_to: None,
                    then_start: false,
                },
            )
            .await?;
        // A person starting a dormant workspace uses it: left dormant, the
        // scheduler would queue its deletion again once it runs.
        if request.transition == Transition::Start
            && self
                .inner
                .store
                .wake_workspace(&workspace_id, self.inner.clock.now_ms())
                .await?
        {
            self.audit_workspace(
                caller,
                &workspace_id,
                "workspace.wake",
                reference,
                "success",
                None,
            )
            .await;
        }
        Ok(build)
    }

    /// A person's delete against the workspace's last report of unsaved
    /// work: held (`UnsavedWork`) unless it discards the work or confirms
    /// the report's digest. Every hold, discard and confirmation is
    /// audited.
    async fn judge_unsaved(
        &self,
        caller: &Caller,
        workspace: &abode_store::Workspace,
        consent: &crate::UnsavedConsent,
    ) -> Result<(), ControlError> {
        use crate::unsaved::UnsavedVerdict;
        let target = format!("{}/{}", workspace.owner_name, workspace.name);
        match self.workspaces().judge_unsaved(workspace, consent).await? {
            UnsavedVerdict::Nothing => Ok(()),
            UnsavedVerdict::GoesAhead { how, digest } => {
                self.audit_workspace(
                    caller,
                    &workspace.id,
                    &format!("workspace.unsaved_{how}"),
                    &target,
                    "success",
                    Some(format!("digest={digest}")),
                )
                .await;
                Ok(())
            }
            UnsavedVerdict::Held(report) => {
                self.audit_workspace(
                    caller,
                    &workspace.id,
                    "workspace.delete_held_unsaved",
                    &target,
                    "held",
                    Some(format!(
                        "digest={} repositories={} age_seconds={}",
                        report.digest,
                        report.repositories.len(),
                        report.age_seconds
                    )),
                )
                .await;
                Err(ControlError::UnsavedWork(crate::unsaved::held_line(
                    &target, &report, consent,
                )))
            }
        }
    }

    /// One page of a workspace's builds, newest first.
    pub async fn list_builds(
        &self,
        caller: &Caller,
        reference: &str,
        status: Option<BuildStatus>,
        after: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Page<Build>, ControlError> {
        let workspace = self
            .workspaces()
            .resolve(caller, reference, Action::WorkspaceRead)
            .await?;
        Ok(self
            .inner
            .store
            .list_build_page(&workspace.id, status, after, page_size(limit))
            .await?)
    }

    /// `number: None` is the latest build.
    pub async fn build(
        &self,
        caller: &Caller,
        reference: &str,
        number: Option<i64>,
    ) -> Result<Build, ControlError> {
        self.build_for(caller, reference, number, Action::WorkspaceRead)
            .await
    }

    /// A build of a workspace the caller may do `action` on.
    pub(crate) async fn build_for(
        &self,
        caller: &Caller,
        reference: &str,
        number: Option<i64>,
        action: Action,
    ) -> Result<Build, ControlError> {
        let workspace = self.workspaces().resolve(caller, reference, action).await?;
        let found = match number {
            Some(number) => {
                self.inner
                    .store
                    .build_by_number(&workspace.id, number)
                    .await
            }
            None => self.inner.store.latest_build(&workspace.id).await,
        };
        or_not_found(found, || match number {
            Some(number) => format!("workspace \"{reference}\" has no build #{number}"),
            None => format!("workspace \"{reference}\" has no build"),
        })
    }

    /// A build and what was recorded of its time (`abode_store::BuildTimings`).
    pub async fn build_timings(
        &self,
        caller: &Caller,
        reference: &str,
        number: Option<i64>,
    ) -> Result<(Build, abode_store::BuildTimings), ControlError> {
        let build = self.build(caller, reference, number).await?;
        let timings = self.inner.store.build_timings(&build.id).await?;
        Ok((build, timings))
    }

    /// Log lines after `after`; with `wait`, holds until a line arrives, the
    /// build ends or the wait is over.
    pub async fn build_logs(
        &self,
        caller: &Caller,
        reference: &str,
        number: Option<i64>,
        after: i64,
        wait: Duration,
    ) -> Result<LogPage, ControlError> {
        let build = self.build(caller, reference, number).await?;
        Ok(self.inner.build_log.page(&build.id, after, wait).await?)
    }

    pub async fn cancel_build(
        &self,
        caller: &Caller,
        reference: &str,
        number: Option<i64>,
    ) -> Result<Build, ControlError> {
        let build = self
            .build_for(caller, reference, number, Action::BuildCancel)
            .await?;
        let message = format!("canceled by {}", caller.user.username);
        if build.status.is_final() {
            return Err(ControlError::Conflict(format!(
                "build #{} of workspace \"{}\" already {}",
                build.number, build.workspace_name, build.status
            )));
        }
        // A build this process runs is interrupted first, so that a cancel
        // is acted on even when the database cannot record it now (a full
        // disk); another server's learns it from the record.
        self.builds().cancel_switches().flip(&build.id);
        if self
            .inner
            .store
            .cancel_pending_build(&build.id, &message)
            .await?
        {
            self.build_log()
                .note(&build.id, &LogStage::SETUP, LogLevel::Warn, &message)
                .await;
            // A held delete's records go void: nothing was forgotten.
            crate::retention::settle(
                &self.inner.store,
                &self.inner.build_log,
                &self.inner.notifications,
                &build.id,
            )
            .await;
            self.build_log().written();
        } else if self.inner.store.cancel_requested(&build.id).await? {
            // Asked already: one cancel, one log line, one audit event.
            return Ok(self.inner.store.build_by_id(&build.id).await?);
        } else {
            self.inner.store.request_cancel(&build.id).await?;
            self.build_log()
                .note(
                    &build.id,
                    &LogStage::CLEANUP,
                    LogLevel::Warn,
                    &format!("{message}; interrupting Terraform"),
                )
                .await;
        }
        self.audit_workspace(
            caller,
            &build.workspace_id,
            "build.cancel",
            &format!("{}/{}", build.owner_name, build.workspace_name),
            "success",
            Some(format!("build={}", build.number)),
        )
        .await;
        Ok(self.inner.store.build_by_id(&build.id).await?)
    }

    /// Applies exactly the saved plan of a held build, once, if `digest` is
    /// that plan's and the workspace's state has not changed since.
    pub async fn confirm_build(
        &self,
        caller: &Caller,
        reference: &str,
        number: Option<i64>,
        digest: &str,
    ) -> Result<Build, ControlError> {
        // Checked before anything is looked up or audited: what is not a
        // digest (any size, any bytes) is never stored.
        let digest = checked_digest(digest)?;
        let build = self
            .build_for(caller, reference, number, Action::BuildConfirm)
            .await?;
        self.held().confirm(caller, build, digest).await
    }

    /// The protections a workspace the caller may read remembers.
    pub async fn protections(
        &self,
        caller: &Caller,
        reference: &str,
    ) -> Result<Vec<Protection>, ControlError> {
        let workspace = self
            .workspaces()
            .resolve(caller, reference, Action::WorkspaceRead)
            .await?;
        self.held().protections(&workspace).await
    }

    /// Releases one remembered protection (`protection.release`: owners on
    /// any workspace, template-admins on their own), on the record.
    pub async fn release_protection(
        &self,
        caller: &Caller,
        reference: &str,
        address: &str,
    ) -> Result<Protection, ControlError> {
        let workspace = self
            .workspaces()
            .resolve(caller, reference, Action::ProtectionRelease)
            .await?;
        self.held()
            .release_protection(caller, &workspace, reference, address)
            .await
    }

    /// `abode retained destroy ID`: queues the build that destroys a
    /// retained resource (held for a person's confirmation of its exact
    /// plan); with `digest`, confirms that held plan. The build, and the
    /// record as it is now.
    pub async fn destroy_retained(
        &self,
        caller: &Caller,
        id: &str,
        digest: Option<&str>,
    ) -> Result<(RetainedResource, Option<Build>), ControlError> {
        let record = self.inner.retained.show(caller, id).await?;
        caller.authorize(Action::WorkspaceDelete, Some(&record.owner_id))?;
        if record.is_snapshot() {
            let record = self
                .inner
                .retained
                .destroy_snapshot(caller, &record)
                .await?;
            return Ok((record, None));
        }
        let build = match digest {
            Some(digest) => {
                let digest = checked_digest(digest)?;
                caller.authorize(Action::BuildConfirm, Some(&record.owner_id))?;
                let building = match &record.destroy_build_id {
                    Some(build_id) => self.inner.store.build_by_id(build_id).await?,
                    None => {
                        return Err(ControlError::Conflict(format!(
                            "retained resource \"{id}\" has no destroy to confirm: run abode retained destroy {id} first"
                        )))
                    }
                };
                self.held().confirm(caller, building, digest).await?
            }
            None => {
                if record.status != RetainedStatus::Open {
                    return Err(ControlError::Conflict(format!(
                        "retained resource \"{id}\" is {}: only an open record is destroyed",
                        record.status
                    )));
                }
                let workspace = self
                    .inner
                    .store
                    .workspace_by_id(&record.workspace_id)
                    .await?;
                self.builds()
                    .request(
                        BuildTarget::Retained {
                            workspace,
                            record: Box::new(record.clone()),
                        },
                        BuildOrder {
                            actor: Actor::User(caller.user.clone()),
                            request_id: caller.request_id.clone(),
                            transition: Transition::Delete,
                            version: VersionChoice::Current,
                            reason: BuildReason::RetainedDestroy,
                            parameters: Default::default(),
                            retention: None,
                            rename_to: None,
                            then_start: false,
                        },
                    )
                    .await?
            }
        };
        let record = self.inner.store.retained_by_id(id).await?;
        Ok((record, Some(build)))
    }

    /// `abode retained restore ID --to WS`: brings a snapshot's files back
    /// into the volume of a stopped workspace (the one at the snapshot's
    /// address, or the workspace's only volume). Reading the snapshot is
    /// connecting to its owner's workspaces; writing is updating and
    /// connecting to the target. A workspace that runs, or whose build is
    /// under way, is refused: a restore never writes under running processes.
    pub async fn restore_snapshot(
        &self,
        caller: &Caller,
        id: &str,
        reference: &str,
    ) -> Result<crate::retained::Restored, ControlError> {
        let record = self.inner.retained.show(caller, id).await?;
        caller.authorize(Action::WorkspaceConnect, Some(&record.owner_id))?;
        if !record.is_snapshot() {
            return Err(ControlError::BadRequest(format!(
                "retained resource \"{id}\" is {} itself, not a snapshot: adopt it into a new workspace (abode create NAME --template T --adopt {id})",
                record.address
            )));
        }
        if record.status != RetainedStatus::Open {
            return Err(ControlError::Conflict(format!(
                "snapshot \"{id}\" is {}: only an open one is restored",
                record.status
            )));
        }
        let workspace = self
            .workspaces()
            .resolve(caller, reference, Action::WorkspaceUpdate)
            .await?;
        caller.authorize(Action::WorkspaceConnect, Some(&workspace.owner_id))?;
        let shown = format!("{}/{}", workspace.owner_name, workspace.name);
        let latest = self.inner.store.latest_build(&workspace.id).await?;
        let stopped =
            latest.transition == Transition::Stop && latest.status == BuildStatus::Succeeded;
        if !stopped {
            let now = match latest.transition {
                Transition::Start => "is running",
                _ => "is not stopped",
            };
            return Err(ControlError::Conflict(format!("workspace {shown} {now}: a restore writes only into a stopped workspace's volume; stop it first (abode stop {})", workspace.name)));
        }
        let state = self.inner.store.state(&workspace.id).await?;
        let state: serde_json::Value = state
            .as_deref()
            .and_then(|state| serde_json::from_slice(state).ok())
            .unwrap_or(serde_json::Value::Null);
        let volumes: Vec<(String, String)> = crate::state::managed_instances(&state)
            .into_iter()
            .filter(|instance| instance.resource_type == "abode_volume")
            .filter_map(|instance| {
                let name = instance.object.pointer("/attributes/name")?.as_str()?;
                Some((instance.address(), name.to_string()))
            })
            .collect();
        let at = |(address, _): &&(String, String)| *address == record.address;
        let Some((_, volume)) = volumes
            .iter()
            .find(at)
            .or(volumes.first().filter(|_| volumes.len() == 1))
        else {
            return Err(ControlError::Conflict(format!(
                "workspace {shown} has {} abode_volume(s), none at {}: nothing to restore into",
                volumes.len(),
                record.address
            )));
        };
        let volume = volume.clone();
        self.inner
            .retained
            .restore_into(caller, record, &shown, &volume)
            .await
    }
}
