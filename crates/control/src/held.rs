//! Held builds: a plan the guard asked to confirm waits here, bound to its
//! digest and the state it was made on, until it is confirmed (applied once,
//! exactly as shown) or expires; and the protections a workspace remembers.

use std::time::Duration;

use tokio::sync::watch;

use abode_runner::LogLevel;
use abode_store::{Build, BuildStatus, Protection, SavedPlan};

use crate::audit::audit_event;
use crate::authz::Action;
use crate::error::or_not_found;
use crate::secrets;
use crate::Caller;
use crate::Control;
use crate::ControlError;

impl Control {
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
        self.confirm_held_build(caller, build, digest).await
    }

    /// Confirms `build`'s held plan with `digest` ([`checked_digest`]): the
    /// caller was allowed to confirm it when the build was found.
    pub(crate) async fn confirm_held_build(
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
                .is_some_and(|deadline| deadline <= self.now_ms())
            {
                return Err(refuse(format!(
                    "build #{} expired: nobody confirmed it in time; start the build again",
                    build.number
                )));
            }
            let saved = self.inner.store.saved_plan(&build.id).await?.ok_or_else(|| {
                refuse(format!("build #{} has no saved plan any more", build.number))
            })?;
            if saved.digest != digest.trim() {
                return Err(refuse(format!(
                    "the digest does not match the saved plan of build #{}: review the build again and confirm the plan it shows",
                    build.number
                )));
            }
            let state = self.inner.store.state(&build.workspace_id).await?;
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
                .inner
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
                self.jobs().queued().await;
                self.build_log()
                    .note(
                        &build.id,
                        "guard",
                        LogLevel::Info,
                        &format!(
                            "confirmed by {}: applying the saved plan {digest}",
                            caller.user.username
                        ),
                    )
                    .await;
                Ok(self.inner.store.build_by_id(&build.id).await?)
            }
            Err(error) => {
                self.audit_workspace(
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
                )
                .await;
                Err(error)
            }
        }
    }

    /// Records that the guard held a build, with its saved plan.
    pub(crate) async fn hold_build(&self, build_id: &str, plan: SavedPlan) {
        let expires_at = self.now_ms()
            + i64::try_from(self.inner.config.confirmation_timeout.as_millis())
                .unwrap_or(i64::MAX / 2);
        let digest = plan.digest.clone();
        // The messages are written with the hold itself.
        let notices = match self.inner.store.build_by_id(build_id).await {
            Ok(build) => {
                self.notifications()
                    .held_notices(&build, expires_at, &digest)
                    .await
            }
            Err(error) => {
                tracing::error!(build = %build_id, %error, "cannot read a build to notify of its hold");
                Vec::new()
            }
        };
        match self
            .inner
            .store
            .hold_build_notifying(build_id, &plan, expires_at, &notices)
            .await
        {
            Ok(true) => {
                if let Ok(build) = self.inner.store.build_by_id(build_id).await {
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
                    .inner
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

    /// Ends held builds whose confirmation time ran out.
    pub async fn expire_held_builds(&self) {
        self.expire_held_builds_at(self.now_ms()).await;
    }

    /// Ends held builds whose deadline is at or before `now` (milliseconds
    /// since the epoch): the sweep, with the time given (tests move it).
    pub async fn expire_held_builds_at(&self, now: i64) {
        let hours = self.inner.config.confirmation_timeout.as_secs_f64() / 3600.0;
        let message = format!(
            "expired: nobody confirmed the plan within {}; the plan was discarded",
            if hours >= 1.0 {
                format!("{hours:.0} h")
            } else {
                format!("{} s", self.inner.config.confirmation_timeout.as_secs())
            }
        );
        let due = match self.inner.store.held_builds_expiring(now).await {
            Ok(due) => due,
            Err(error) => {
                tracing::error!(%error, "cannot expire held builds");
                return;
            }
        };
        let mut expired = Vec::new();
        for build in due {
            // Each expiry with its messages, in one transaction.
            let notices = self.notifications().expired_notices(&build, &message).await;
            match self
                .inner
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
        for build_id in expired {
            self.build_log()
                .note(&build_id, "guard", LogLevel::Warn, &message)
                .await;
            crate::retention::settle(self, &build_id).await;
            if let Ok(build) = self.inner.store.build_by_id(&build_id).await {
                self.audit_system(
                    "build.expire",
                    &build,
                    Some(format!("build={}", build.number)),
                )
                .await;
            }
        }
    }

    /// Tells the people concerned about held builds that expire within the
    /// configured warning (once per build).
    pub async fn warn_expiring_held_builds(&self) {
        let warning = i64::try_from(self.inner.config.notifications.expiry_warning.as_millis())
            .unwrap_or(i64::MAX / 4);
        let soon = match self
            .inner
            .store
            .held_builds_expiring(self.now_ms().saturating_add(warning))
            .await
        {
            Ok(soon) => soon,
            Err(error) => {
                tracing::error!(%error, "cannot read the held builds that expire soon");
                return;
            }
        };
        for build in soon {
            let notices = self.notifications().expiring_notices(&build).await;
            if let Err(error) = self.inner.store.enqueue_notifications(&notices).await {
                tracing::error!(build = %build.id, %error, "cannot notify of a held build's expiry");
            }
        }
    }

    /// The protections a workspace remembers, as the guard reads them.
    pub(crate) async fn remembered(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<abode_guard::RememberedProtection>, ControlError> {
        let stored = self.inner.store.protections(workspace_id).await?;
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

    pub async fn protections(
        &self,
        caller: &Caller,
        reference: &str,
    ) -> Result<Vec<Protection>, ControlError> {
        let workspace = self
            .resolve_workspace(caller, reference, Action::WorkspaceRead)
            .await?;
        Ok(self.inner.store.protections(&workspace.id).await?)
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
            .resolve_workspace(caller, reference, Action::ProtectionRelease)
            .await?;
        let released = or_not_found(
            self.inner
                .store
                .release_protection(&workspace.id, address)
                .await,
            || format!("workspace \"{reference}\" does not remember a protection of {address}"),
        )?;
        self.audit_workspace(
            caller,
            &workspace.id,
            "protection.release",
            &format!("{}/{}", workspace.owner_name, workspace.name),
            "success",
            Some(format!(
                "address={} mode={}",
                released.address, released.mode
            )),
        )
        .await;
        Ok(released)
    }
}

/// What the guard decided for a build; `None` for a build that never
/// reached the guard. (The store reads the report: one that does not read
/// fails the build's read.)
pub fn guard_decision(build: &Build) -> Option<abode_guard::Decision> {
    build.guard_report.as_ref().map(|report| report.decision)
}

/// Ends held builds nobody confirmed in time; runs until shutdown.
pub(crate) async fn expiry_sweeper(control: Control, mut shutdown: watch::Receiver<bool>) {
    let every = (control.inner.config.confirmation_timeout / 10)
        .clamp(Duration::from_millis(250), Duration::from_secs(10));
    loop {
        if *shutdown.borrow() {
            break;
        }
        control.expire_held_builds().await;
        control.warn_expiring_held_builds().await;
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
