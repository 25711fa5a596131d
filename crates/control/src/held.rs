//! Held builds: a plan the guard asked to confirm waits here, bound to its
//! digest and the state it was made on, until it is confirmed (applied once,
//! exactly as shown) or expires; and the protections a workspace remembers.
//!
//! A service of its own (`Control::held()`): it holds the store, the clock,
//! the audit log and the handles of the build log, notifications and the
//! job queue, and nothing else of the control plane. Finding the build or
//! workspace a person names (and whether they may act on it) is the door's
//! (`WorkspaceBuilds::confirm_build`, `WorkspaceBuilds::protections`); settling what
//! an expired delete retained is the retention's.

use std::time::Duration;

use tokio::sync::watch;

use abode_runner::{LogLevel, LogStage};
use abode_store::{Build, BuildStatus, Protection, SavedPlan, Store, Workspace};

use crate::audit::{audit_event, system_event, workspace_event, Audit};
use crate::error::or_not_found;
use crate::secrets;
use crate::{BuildLog, Caller, Clock, ControlError, JobQueue, Notifications};

/// The held builds and remembered protections; cheap to clone.
#[derive(Clone)]
pub struct Held {
    store: Store,
    clock: Clock,
    audit: Audit,
    build_log: BuildLog,
    notifications: Notifications,
    jobs: JobQueue,
    /// How long a held build waits for a confirmation.
    confirmation_timeout: Duration,
    /// How long before a held build expires its people are warned.
    expiry_warning: Duration,
}

/// What [`Held`] is made of.
pub(crate) struct HeldParts {
    pub(crate) store: Store,
    pub(crate) clock: Clock,
    pub(crate) build_log: BuildLog,
    pub(crate) notifications: Notifications,
    pub(crate) jobs: JobQueue,
    pub(crate) confirmation_timeout: Duration,
    pub(crate) expiry_warning: Duration,
}

impl Held {
    pub(crate) fn new(parts: HeldParts) -> Held {
        Held {
            audit: Audit::new(parts.store.clone()),
            store: parts.store,
            clock: parts.clock,
            build_log: parts.build_log,
            notifications: parts.notifications,
            jobs: parts.jobs,
            confirmation_timeout: parts.confirmation_timeout,
            expiry_warning: parts.expiry_warning,
        }
    }

    /// Confirms `build`'s held plan with `digest` ([`checked_digest`]): the
    /// caller was allowed to confirm it when the build was found.
    pub(crate) async fn confirm(
        &self,
        caller: &Caller,
        build: Build,
        digest: &str,
    ) -> Result<Build, ControlError> {
        let digest = digest.to_ascii_lowercase();
        let digest = digest.as_str();
        let target = format!("{}/{}", build.owner_name, build.workspace_name);
        let refuse = |message: String| ControlError::Conflict(message);
        let result = async {
            if build.status != BuildStatus::AwaitingConfirmation {
                let blocked = build.status == BuildStatus::Failed
                    && guard_decision(&build) == Some(abode_guard::Decision::Block);
                return Err(refuse(if blocked {
                    format!(
                        "build #{} was blocked by the plan guard and can never be confirmed: fix the template or release the protection, then start again",
                        build.number
                    )
                } else {
                    format!(
                        "build #{} of workspace \"{}\" is not awaiting confirmation (it is {})",
                        build.number, build.workspace_name, build.status
                    )
                }));
            }
            // The deadline holds by itself, not only once the sweeper ran.
            if build
                .expires_at
                .is_some_and(|deadline| deadline <= self.clock.now_ms())
            {
                return Err(refuse(format!(
                    "build #{} expired: nobody confirmed it in time; start the build again",
                    build.number
                )));
            }
            let saved = self.store.saved_plan(&build.id).await?.ok_or_else(|| {
                refuse(format!("build #{} has no saved plan any more", build.number))
            })?;
            if saved.digest != digest.trim() {
                return Err(refuse(format!(
                    "the digest does not match the saved plan of build #{}: review the build again and confirm the plan it shows",
                    build.number
                )));
            }
            let state = self.store.state(&build.workspace_id).await?;
            if secrets::sha256_hex(state.as_deref().unwrap_or_default()) != saved.state_digest {
                return Err(refuse(
                    "the workspace changed since this plan was made; start the build again".into(),
                ));
            }
            let mut audit = audit_event(
                Some(&caller.user),
                caller.request_id.clone(),
                "build.confirm",
                "workspace",
                &target,
                "success",
                Some(format!("build={} digest={}", build.number, saved.digest)),
            );
            audit.workspace_id = Some(build.workspace_id.clone());
            abode_identity::audit::mark_recorded();
            if !self
                .store
                .confirm_build(&build.id, &saved.digest, &caller.user.id, &audit)
                .await?
            {
                return Err(refuse(format!(
                    "build #{} was already confirmed or canceled",
                    build.number
                )));
            }
            Ok(saved.digest)
        }
        .await;
        match result {
            Ok(digest) => {
                self.jobs.queued().await;
                self.build_log
                    .note(
                        &build.id,
                        &LogStage::GUARD,
                        LogLevel::Info,
                        &format!(
                            "confirmed by {}: applying the saved plan {digest}",
                            caller.user.username
                        ),
                    )
                    .await;
                Ok(self.store.build_by_id(&build.id).await?)
            }
            Err(error) => {
                self.audit
                    .record(&workspace_event(
                        caller,
                        &build.workspace_id,
                        "build.confirm",
                        &target,
                        "failure",
                        Some(format!(
                            "build={} digest={} reason={error}",
                            build.number,
                            digest.trim()
                        )),
                    ))
                    .await;
                Err(error)
            }
        }
    }

    /// Records that the guard held a build, with its saved plan.
    pub async fn hold(&self, build_id: &str, plan: SavedPlan) {
        let expires_at = self.clock.now_ms()
            + i64::try_from(self.confirmation_timeout.as_millis()).unwrap_or(i64::MAX / 2);
        let digest = plan.digest.clone();
        // The messages are written with the hold itself.
        let notices = match self.store.build_by_id(build_id).await {
            Ok(build) => {
                self.notifications
                    .held_notices(&build, expires_at, &digest)
                    .await
            }
            Err(error) => {
                tracing::error!(build = %build_id, %error, "cannot read a build to notify of its hold");
                Vec::new()
            }
        };
        match self
            .store
            .hold_build_notifying(build_id, &plan, expires_at, &notices)
            .await
        {
            Ok(true) => {
                if let Ok(build) = self.store.build_by_id(build_id).await {
                    self.audit_system(
                        "build.held",
                        &build,
                        Some(format!("build={} digest={digest}", build.number)),
                    )
                    .await;
                }
            }
            Ok(false) => {}
            Err(error) => {
                tracing::error!(build = %build_id, %error, "cannot hold a build");
                let _ = self
                    .store
                    .finish_build(
                        build_id,
                        BuildStatus::Failed,
                        Some("cannot save the plan for confirmation"),
                    )
                    .await;
            }
        }
    }

    /// Ends held builds whose deadline is at or before `now` (milliseconds
    /// since the epoch): the sweep, with the time given (tests move it).
    /// A held delete that expired leaves its retained records void.
    pub async fn expire_at(&self, now: i64) {
        for build_id in self.expire_due(now).await {
            crate::retention::settle(&self.store, &self.build_log, &self.notifications, &build_id)
                .await;
        }
    }

    /// Ends held builds whose deadline is at or before `now`, each with its
    /// messages, log line and audit event; returns the ids of those it ended.
    async fn expire_due(&self, now: i64) -> Vec<String> {
        let hours = self.confirmation_timeout.as_secs_f64() / 3600.0;
        let message = format!(
            "expired: nobody confirmed the plan within {}; the plan was discarded",
            if hours >= 1.0 {
                format!("{hours:.0} h")
            } else {
                format!("{} s", self.confirmation_timeout.as_secs())
            }
        );
        let due = match self.store.held_builds_expiring(now).await {
            Ok(due) => due,
            Err(error) => {
                tracing::error!(%error, "cannot expire held builds");
                return Vec::new();
            }
        };
        let mut expired = Vec::new();
        for build in due {
            // Each expiry with its messages, in one transaction.
            let notices = self.notifications.expired_notices(&build, &message).await;
            match self
                .store
                .expire_held_build(&build.id, now, &message, &notices)
                .await
            {
                Ok(true) => expired.push(build.id),
                Ok(false) => {}
                Err(error) => {
                    tracing::error!(build = %build.id, %error, "cannot expire a held build")
                }
            }
        }
        for build_id in &expired {
            self.build_log
                .note(build_id, &LogStage::GUARD, LogLevel::Warn, &message)
                .await;
            if let Ok(build) = self.store.build_by_id(build_id).await {
                self.audit_system(
                    "build.expire",
                    &build,
                    Some(format!("build={}", build.number)),
                )
                .await;
            }
        }
        expired
    }

    /// Tells the people concerned about held builds that expire within the
    /// configured warning (once per build).
    pub(crate) async fn warn_expiring(&self) {
        let warning = i64::try_from(self.expiry_warning.as_millis()).unwrap_or(i64::MAX / 4);
        let soon = match self
            .store
            .held_builds_expiring(self.clock.now_ms().saturating_add(warning))
            .await
        {
            Ok(soon) => soon,
            Err(error) => {
                tracing::error!(%error, "cannot read the held builds that expire soon");
                return;
            }
        };
        for build in soon {
            let notices = self.notifications.expiring_notices(&build).await;
            if let Err(error) = self.store.enqueue_notifications(&notices).await {
                tracing::error!(build = %build.id, %error, "cannot notify of a held build's expiry");
            }
        }
    }

    /// The protections a workspace remembers, as the guard reads them.
    pub async fn remembered(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<abode_guard::RememberedProtection>, ControlError> {
        let stored = self.store.protections(workspace_id).await?;
        Ok(stored
            .into_iter()
            .map(|protection| abode_guard::RememberedProtection {
                mode: abode_guard::Mode::parse(&protection.mode)
                    .unwrap_or(abode_guard::Mode::Block),
                retain: protection
                    .retain_expire
                    .as_deref()
                    .map(|expire| abode_guard::RetainRule {
                        retain_for_secs: protection
                            .retain_for_secs
                            .and_then(|secs| u64::try_from(secs).ok()),
                        expire: abode_guard::Expire::parse(expire).unwrap_or_default(),
                    }),
                address: protection.address,
            })
            .collect())
    }

    /// The protections `workspace` remembers (the caller may read it).
    pub(crate) async fn protections(
        &self,
        workspace: &Workspace,
    ) -> Result<Vec<Protection>, ControlError> {
        Ok(self.store.protections(&workspace.id).await?)
    }

    /// Releases one protection `workspace` (named `reference` by the
    /// caller, who may release its protections) remembers, on the record.
    pub(crate) async fn release_protection(
        &self,
        caller: &Caller,
        workspace: &Workspace,
        reference: &str,
        address: &str,
    ) -> Result<Protection, ControlError> {
        let released = or_not_found(
            self.store.release_protection(&workspace.id, address).await,
            || format!("workspace \"{reference}\" does not remember a protection of {address}"),
        )?;
        self.audit
            .record(&workspace_event(
                caller,
                &workspace.id,
                "protection.release",
                &format!("{}/{}", workspace.owner_name, workspace.name),
                "success",
                Some(format!(
                    "address={} mode={}",
                    released.address, released.mode
                )),
            ))
            .await;
        Ok(released)
    }

    /// Records what the server did to a held build.
    async fn audit_system(&self, action: &str, build: &Build, details: Option<String>) {
        let (actor, event) = system_event(action, build, details);
        self.audit.record_as(&actor, event).await;
    }
}

/// What the guard decided for a build; `None` for a build that never
/// reached the guard. (The store reads the report: one that does not read
/// fails the build's read.)
pub fn guard_decision(build: &Build) -> Option<abode_guard::Decision> {
    build.guard_report.as_ref().map(|report| report.decision)
}

/// Ends held builds nobody confirmed in time; runs until shutdown.
pub(crate) async fn expiry_sweeper(
    held: Held,
    confirmation_timeout: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let every =
        (confirmation_timeout / 10).clamp(Duration::from_millis(250), Duration::from_secs(10));
    loop {
        if *shutdown.borrow() {
            break;
        }
        held.expire_at(held.clock.now_ms()).await;
        held.warn_expiring().await;
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// A plan digest as a person gives it: 64 hexadecimal characters, trimmed.
pub(crate) fn checked_digest(digest: &str) -> Result<&str, ControlError> {
    if digest.trim().is_empty() {
        return Err(ControlError::BadRequest(
            "give the plan digest you reviewed (the build's plan_digest)".into(),
        ));
    }
    let digest = digest.trim();
    if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ControlError::BadRequest(
            "a plan digest is 64 hexadecimal characters (the build's plan_digest)".into(),
        ));
    }
    Ok(digest)
}
