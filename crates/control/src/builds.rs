//! Builds: the door every build request goes through, reading builds and
//! their logs, and cancellation. A build goes from "requested" here to
//! "applied" in `provisioner/`.

use std::time::Duration;

use abode_store::{page_size, Build, BuildStatus, LogLine, NewBuild, Page, StoreError, Transition};

use crate::error::or_not_found;
use crate::lifecycle;
use crate::Caller;
use crate::Control;
use crate::ControlError;

/// A page of build log lines.
#[derive(Debug, Clone)]
pub struct LogPage {
    pub lines: Vec<LogLine>,
    pub status: BuildStatus,
    pub done: bool,
}

/// What a build request asks for.
#[derive(Debug, Clone)]
pub struct BuildRequest {
    pub transition: Transition,
    pub template_version: Option<i64>,
    pub update: bool,
}

impl Control {
    pub async fn start_build(
        &self,
        caller: &Caller,
        reference: &str,
        request: &BuildRequest,
    ) -> Result<Build, ControlError> {
        let workspace = self.resolve_workspace(caller, reference).await?;
        let transition = request.transition;
        let (version_id, reason) = match transition {
            Transition::Start if request.update || request.template_version.is_some() => {
                let template = self.template(&workspace.template_name).await?;
                let version_id = match request.template_version {
                    Some(number) => {
                        or_not_found(
                            self.inner
                                .store
                                .template_version(&template.id, number)
                                .await,
                            || format!("template \"{}\" has no version {number}", template.name),
                        )?
                        .id
                    }
                    None => template.active_version_id.clone().ok_or_else(|| {
                        ControlError::Conflict(format!(
                            "template \"{}\" has no active version",
                            template.name
                        ))
                    })?,
                };
                (version_id, "update")
            }
            _ => (workspace.template_version_id.clone(), transition.as_str()),
        };
        let latest = self.inner.store.latest_build(&workspace.id).await?;
        lifecycle::check_new_build(&workspace, &latest, transition, &version_id)?;
        let created = self
            .inner
            .store
            .create_build(&NewBuild {
                id: abode_store::new_id(),
                workspace_id: workspace.id.clone(),
                transition,
                template_version_id: version_id,
                initiator_id: caller.user.id.clone(),
                reason: reason.into(),
            })
            .await;
        let build = match created {
            Err(StoreError::Conflict(_)) => {
                return Err(ControlError::Conflict(format!(
                "workspace \"{}\" already has a build pending or running; wait for it or cancel it",
                workspace.name
            )))
            }
            Err(StoreError::NotFound(_)) => {
                return Err(ControlError::Conflict(format!(
                    "workspace \"{}\" was deleted",
                    workspace.name
                )))
            }
            other => other?,
        };
        self.inner.jobs_queued.notify_one();
        self.audit_build(caller, &build).await;
        Ok(build)
    }

    /// One page of a workspace's builds, newest first.
    pub async fn builds(
        &self,
        caller: &Caller,
        reference: &str,
        status: Option<BuildStatus>,
        after: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Page<Build>, ControlError> {
        let workspace = self.resolve_workspace(caller, reference).await?;
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
        let workspace = self.resolve_workspace(caller, reference).await?;
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
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Register interest before reading, so a line written in between
            // still wakes this follower.
            let notified = self.inner.log_written.notified();
            let status = self.inner.store.build_by_id(&build.id).await?.status;
            let lines = self.inner.store.logs_after(&build.id, after, 1000).await?;
            // A held build writes nothing more until someone confirms it.
            let done = (status.is_final() || status == BuildStatus::AwaitingConfirmation)
                && lines.len() < 1000;
            if !lines.is_empty() || done || tokio::time::Instant::now() >= deadline {
                return Ok(LogPage {
                    lines,
                    status,
                    done,
                });
            }
            // Followers poll the database at least every second, in case a line
            // was written by another process.
            let _ = tokio::time::timeout_at(
                deadline.min(tokio::time::Instant::now() + Duration::from_secs(1)),
                notified,
            )
            .await;
        }
    }

    pub async fn cancel_build(
        &self,
        caller: &Caller,
        reference: &str,
        number: Option<i64>,
    ) -> Result<Build, ControlError> {
        let build = self.build(caller, reference, number).await?;
        let message = format!("canceled by {}", caller.user.username);
        if build.status.is_final() {
            return Err(ControlError::Conflict(format!(
                "build #{} of workspace \"{}\" already {}",
                build.number, build.workspace_name, build.status
            )));
        }
        if self
            .inner
            .store
            .cancel_pending_build(&build.id, &message)
            .await?
        {
            self.note(&build.id, "setup", "warn", &message).await;
            self.inner.log_written.notify_waiters();
        } else if self.inner.store.cancel_requested(&build.id).await? {
            // Asked already: one cancel, one log line, one audit event.
            return Ok(self.inner.store.build_by_id(&build.id).await?);
        } else {
            self.inner.store.request_cancel(&build.id).await?;
            self.note(
                &build.id,
                "cleanup",
                "warn",
                &format!("{message}; interrupting Terraform"),
            )
            .await;
            if let Ok(running) = self.inner.running.lock() {
                if let Some(switch) = running.get(&build.id) {
                    let _ = switch.send(true);
                }
            }
        }
        self.audit(
            Some(&caller.user),
            caller.request_id.clone(),
            "build.cancel",
            "workspace",
            &format!("{}/{}", build.owner_name, build.workspace_name),
            "success",
            Some(format!("build={}", build.number)),
        )
        .await;
        Ok(self.inner.store.build_by_id(&build.id).await?)
    }

    /// [`Control::log`] where the caller goes on whatever happens: a line that
    /// cannot be written is reported in the server's log instead.
    pub(crate) async fn note(&self, build_id: &str, stage: &str, level: &str, text: &str) {
        if let Err(error) = self.log(build_id, stage, level, text).await {
            tracing::error!(build = %build_id, %error, "cannot write a build log line");
        }
    }

    pub(crate) async fn log(
        &self,
        build_id: &str,
        stage: &str,
        level: &str,
        text: &str,
    ) -> Result<(), ControlError> {
        self.inner
            .store
            .append_log(
                build_id,
                &abode_store::NewLogLine {
                    stage: stage.into(),
                    level: level.into(),
                    text: text.into(),
                },
            )
            .await?;
        self.inner.log_written.notify_waiters();
        Ok(())
    }
}
