//! The lifecycle scheduler: autostop, autostart, failure cleanup, dormancy
//! and dormant deletion, on a tick.
//!
//! Each tick runs on one server (the holder of the `scheduler.tick` lease):
//! it reads one snapshot (`abode_store::TickSnapshot`), hands it to the pure
//! decision (`abode_schedule::decide_with`) and carries out each action
//! through the door as the `scheduler` system actor with the matching
//! reason. Every build it asks for goes through the guard like anyone's; a
//! delete it starts is the system's (`abode_guard::Initiator::System`), so
//! a protected resource is not destroyed without a person's confirmation.
//! `facts.rs` turns stored rows into the decision's facts.
//!
//! A service of its own (`Control::scheduler()`): it holds the store, the
//! clock, the metrics, and the handles of identity (dormant accounts), the
//! door and notifications, and nothing else of the control plane.

mod facts;
mod retained_expiry;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use abode_schedule::{Action, ScheduleCache, StopReason, Tick};
use abode_store::{Build, BuildReason, BuildStatus, SystemActor, Transition};
use tokio::sync::watch;

use std::sync::Arc;

use abode_store::Store;

use crate::builds::{BuildOrder, BuildTarget, VersionChoice};
use crate::Actor;
use crate::{Builds, Clock, ControlError, Identity, Metrics, Notifications};

pub(crate) use facts::policy;

/// The lease that makes one server the ticking one.
const TICK_LEASE: &str = "scheduler.tick";
/// When the previous tick decided (Unix ms), whichever server ran it.
const PREVIOUS_TICK: &str = "scheduler.previous_tick";

/// How the scheduler runs (`abode server --autobuild-poll-interval`).
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    pub poll_interval: Duration,
    pub settings: abode_schedule::Settings,
    /// People not seen for this long become dormant at a tick
    /// (`--dormancy-period`); `None`: never.
    pub account_dormancy: Option<Duration>,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            poll_interval: Duration::from_secs(60),
            settings: abode_schedule::Settings::default(),
            account_dormancy: None,
        }
    }
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    pub builds: usize,
    pub dormant: usize,
    pub notified: usize,
    /// Automatic deletes held for unsaved work.
    pub held: usize,
    /// Actions the door refused or that failed (logged one by one).
    pub failed: usize,
}

/// The lifecycle scheduler; cheap to clone.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<SchedulerParts>,
}

/// What [`Scheduler`] holds.
pub(crate) struct SchedulerParts {
    pub(crate) store: Store,
    pub(crate) clock: Clock,
    pub(crate) metrics: Metrics,
    pub(crate) config: SchedulerConfig,
    /// This server, for the tick's lease.
    pub(crate) server_id: String,
    pub(crate) identity: Arc<Identity>,
    pub(crate) builds: Builds,
    pub(crate) notifications: Notifications,
    pub(crate) retained: Arc<crate::retained::Retained>,
    pub(crate) audit: crate::audit::Audit,
}

/// The loop: a tick every `poll_interval`, on the lease holder only.
pub(crate) async fn ticker(scheduler: Scheduler, mut shutdown: watch::Receiver<bool>) {
    let config = scheduler.inner.config.clone();
    let cache = Mutex::new(ScheduleCache::default());
    loop {
        if *shutdown.borrow() {
            break;
        }
        let lease =
            i64::try_from(config.poll_interval.saturating_mul(3).as_millis()).unwrap_or(i64::MAX);
        match scheduler
            .inner
            .store
            .try_lease(TICK_LEASE, &scheduler.inner.server_id, lease)
            .await
        {
            Ok(true) => match scheduler.tick_with(&cache).await {
                Ok(report) => count_actions(&scheduler.inner.metrics, &report),
                Err(error) => tracing::error!(%error, "the scheduler's tick failed"),
            },
            Ok(false) => tracing::debug!("another server runs the scheduler"),
            Err(error) => tracing::error!(%error, "cannot take the scheduler's lease"),
        }
        scheduler
            .inner
            .metrics
            .background_pass(abode_metrics::PASS_SCHEDULER);
        tokio::select! {
            _ = tokio::time::sleep(config.poll_interval) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// What one tick did, into `abode_scheduler_actions_total`.
fn count_actions(metrics: &abode_metrics::Metrics, report: &TickReport) {
    for (action, count) in [
        ("build", report.builds),
        ("dormant", report.dormant),
        ("notified", report.notified),
        ("held", report.held),
        ("failed", report.failed),
    ] {
        metrics.scheduler_actions(action, u64::try_from(count).unwrap_or(u64::MAX));
    }
}

impl Scheduler {
    pub(crate) fn new(parts: SchedulerParts) -> Scheduler {
        Scheduler {
            inner: Arc::new(parts),
        }
    }

    /// One tick, now (the loop's tick; tests call it instead of waiting).
    pub async fn tick(&self) -> Result<TickReport, ControlError> {
        self.tick_with(&Mutex::new(ScheduleCache::default())).await
    }

    async fn tick_with(&self, cache: &Mutex<ScheduleCache>) -> Result<TickReport, ControlError> {
        let config = &self.inner.config;
        let now = self.inner.clock.now_ms();
        let interval = i64::try_from(config.poll_interval.as_millis()).unwrap_or(i64::MAX);
        let previous = match self.inner.store.platform_setting(PREVIOUS_TICK).await? {
            Some(text) => text.parse::<i64>().unwrap_or(now - interval),
            None => now - interval,
        };
        if let Some(period) = config.account_dormancy {
            let slept = self.inner.identity.mark_dormant_accounts(period).await?;
            if slept > 0 {
                tracing::info!(
                    "{slept} account(s) not seen for the dormancy period are now dormant"
                );
            }
        }
        // Retained resources' expiries are their own sweep: one that fails
        // (a database hiccup) does not keep the tick from workspaces.
        match self.retained_expiry_sweep(now).await {
            Ok(0) => {}
            Ok(told) => tracing::info!("{told} message(s) about retained resources that expire"),
            Err(error) => {
                tracing::warn!(%error, "the expiry sweep of retained resources failed; the next tick tries again")
            }
        }
        let rows = self.inner.store.scheduler_tick_snapshot().await?;
        let snapshot = facts::snapshot(rows);
        let tick = Tick {
            now: crate::times::utc_datetime(now),
            previous: crate::times::utc_datetime(previous.min(now)),
            settings: config.settings,
        };
        let decision = match cache.lock() {
            Ok(mut cache) => abode_schedule::decide_with(&snapshot, &tick, &mut cache),
            Err(_) => abode_schedule::decide(&snapshot, &tick),
        };
        self.inner
            .store
            .set_platform_setting(PREVIOUS_TICK, &now.to_string())
            .await?;
        for problem in &decision.problems {
            tracing::warn!(workspace = %problem.workspace_id, "{}", problem.message);
        }
        let mut report = TickReport::default();
        for action in &decision.actions {
            if let Err(error) = self.carry_out(action, now, &mut report).await {
                report.failed += 1;
                tracing::warn!(?action, %error, "a scheduler action failed");
            }
        }
        Ok(report)
    }

    async fn carry_out(
        &self,
        action: &Action,
        now: i64,
        report: &mut TickReport,
    ) -> Result<(), ControlError> {
        let workspace = self
            .inner
            .store
            .workspace_by_id(action.workspace_id())
            .await?;
        match action {
            Action::Stop { reason, .. } => {
                let reason = match reason {
                    StopReason::Autostop => BuildReason::Autostop,
                    StopReason::FailureTtl => BuildReason::FailureTtl,
                };
                self.scheduled_build(workspace, Transition::Stop, VersionChoice::Current, reason)
                    .await?;
                report.builds += 1;
            }
            Action::Start { update, .. } => {
                let version = if *update {
                    VersionChoice::Active
                } else {
                    VersionChoice::Current
                };
                self.scheduled_build(
                    workspace,
                    Transition::Start,
                    version,
                    BuildReason::Autostart,
                )
                .await?;
                report.builds += 1;
            }
            Action::MarkDormant {
                stop_too,
                delete_at,
                ..
            } => {
                let delete_at = delete_at.map(|at| at.timestamp_millis());
                if self
                    .inner
                    .store
                    .mark_dormant(&workspace.id, now, delete_at)
                    .await?
                {
                    report.dormant += 1;
                    self.inner
                        .notifications
                        .notify_workspace_dormant(&workspace, now, delete_at)
                        .await?;
                    if *stop_too {
                        self.scheduled_build(
                            workspace,
                            Transition::Stop,
                            VersionChoice::Current,
                            BuildReason::Dormancy,
                        )
                        .await?;
                        report.builds += 1;
                    }
                }
            }
            Action::NotifyDeletionScheduled { at, .. } => {
                self.inner
                    .notifications
                    .notify_workspace_deletion_scheduled(&workspace, at.timestamp_millis())
                    .await?;
                self.inner
                    .store
                    .deletion_notified(&workspace.id, now)
                    .await?;
                report.notified += 1;
            }
            Action::Delete { .. } => {
                if self.held_for_unsaved_work(&workspace).await? {
                    report.held += 1;
                    return Ok(());
                }
                self.scheduled_build(
                    workspace,
                    Transition::Delete,
                    VersionChoice::Current,
                    BuildReason::Autodelete,
                )
                .await?;
                report.builds += 1;
            }
        }
        Ok(())
    }

    /// An automatic delete never discards unsaved work: when the
    /// workspace's last report shows some, the delete is held (it is tried
    /// again at the next pass, and goes ahead once the work is saved or a
    /// person deleted the workspace). The first hold for a report is
    /// audited and told to the owner and the template admins.
    async fn held_for_unsaved_work(
        &self,
        workspace: &abode_store::Workspace,
    ) -> Result<bool, ControlError> {
        let verdict = crate::unsaved::judge_delete(
            &self.inner.store,
            &self.inner.clock,
            &workspace.id,
            &crate::UnsavedConsent::None,
        )
        .await?;
        let crate::unsaved::UnsavedVerdict::Held(report) = verdict else {
            return Ok(false);
        };
        if self
            .inner
            .store
            .mark_unsaved_hold(&workspace.id, &report.digest)
            .await?
        {
            let mut event = crate::audit::audit_event(
                None,
                None,
                "workspace.delete_held_unsaved",
                "workspace",
                &format!("{}/{}", workspace.owner_name, workspace.name),
                "held",
                Some(format!(
                    "digest={} repositories={} age_seconds={} reason=autodelete",
                    report.digest,
                    report.repositories.len(),
                    report.age_seconds
                )),
            );
            event.workspace_id = Some(workspace.id.clone());
            self.inner
                .audit
                .record_as(&Actor::System(SystemActor::Scheduler), event)
                .await;
            self.inner
                .notifications
                .notify_delete_held_unsaved(workspace, &report)
                .await?;
            tracing::info!(workspace = %workspace.id, digest = %report.digest,
                "an automatic delete was held: the workspace has unsaved work");
        }
        Ok(true)
    }

    async fn scheduled_build(
        &self,
        workspace: abode_store::Workspace,
        transition: Transition,
        version: VersionChoice,
        reason: BuildReason,
    ) -> Result<Build, ControlError> {
        self.inner
            .builds
            .request(
                BuildTarget::Existing(workspace),
                BuildOrder {
                    actor: Actor::System(SystemActor::Scheduler),
                    request_id: None,
                    transition,
                    version,
                    reason,
                    parameters: BTreeMap::new(),
                    retention: None,
                    rename_to: None,
                    then_start: false,
                },
            )
            .await
    }

    /// After a build ended: a succeeded start sets the run's autostop
    /// deadlines from the template's policy and the workspace's ttl; a
    /// succeeded stop or delete clears them. A prebuild pool's own builds set
    /// none (a claim's does: the workspace is a person's from then on).
    pub async fn build_ended(&self, build: &Build, status: BuildStatus) {
        if status != BuildStatus::Succeeded || build.reason == BuildReason::Prebuild {
            return;
        }
        if let Err(error) = self.set_run_deadlines(build).await {
            tracing::error!(build = %build.id, %error, "cannot set the workspace's autostop deadline");
        }
    }

    async fn set_run_deadlines(&self, build: &Build) -> Result<(), ControlError> {
        let store = &self.inner.store;
        let (deadline, max_deadline) = match build.transition {
            Transition::Start => {
                let workspace = store.workspace_by_id(&build.workspace_id).await?;
                let policy = policy(store.template_policy(&workspace.template_id).await?);
                let ttl = store
                    .workspace_lifecycle(&workspace.id)
                    .await?
                    .ttl_ms
                    .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
                let started = crate::times::utc_datetime(
                    build
                        .finished_at
                        .unwrap_or_else(|| self.inner.clock.now_ms()),
                );
                let deadlines = abode_schedule::deadlines_at_start(started, &policy, ttl);
                (
                    deadlines.deadline.map(|at| at.timestamp_millis()),
                    deadlines.max_deadline.map(|at| at.timestamp_millis()),
                )
            }
            Transition::Stop | Transition::Delete => (None, None),
        };
        store
            .set_deadlines(&build.workspace_id, deadline, max_deadline)
            .await?;
        Ok(())
    }
}
