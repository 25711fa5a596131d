//! Prebuilt workspaces: pools of ready workspaces per preset, kept by a
//! reconciliation loop and claimed by people in one transaction.
//!
//! The loop (`reconciler`) runs on one server at a time (the holder of the
//! `prebuilds.reconciler` lease). Each round reads one snapshot
//! (`abode_store::PrebuildSnapshot`, one transaction), hands it to the pure
//! decision (`abode_prebuilds::decide`) and carries out the actions through
//! the door (`Builds::request`) as the `prebuilds` system actor, so
//! that a prebuild's builds are checked, audited and guarded like anyone's.
//! `snapshot.rs` turns stored rows into the decision's input; the door's
//! `builds/claim.rs` is the other side, a person taking a ready prebuild.
//!
//! A service of its own (`Control::prebuilds()`): it holds the store, the
//! clock, the metrics, the handles of the templates, the door, the build
//! log, notifications and the audit log, and nothing else of the control
//! plane.

mod ended;
mod snapshot;

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use abode_prebuilds::{Action, Decision, Settings};
use abode_runner::{LogLevel, LogStage};
use abode_store::{BuildReason, SystemActor, Transition, PREBUILDS_PAUSED};
use serde_json::Value;
use tokio::sync::watch;

use crate::audit::{audit_event, Audit};
use crate::authz::Action as Permission;
use crate::builds::{BuildOrder, BuildTarget, VersionChoice};
use crate::Actor;
use crate::{BuildLog, Builds, Caller, Clock, ControlError, Metrics, Notifications, Templates};
use abode_store::Store;
use std::sync::Arc;

pub use snapshot::PoolStatus;

/// The lease that makes one server the reconciler.
const RECONCILER_LEASE: &str = "prebuilds.reconciler";

/// How the reconciliation runs (`abode server --prebuilds-*`).
#[derive(Debug, Clone)]
pub struct PrebuildsConfig {
    /// Time between two rounds.
    pub reconcile_interval: Duration,
    /// The wait after a failed prebuild build, times the consecutive failures.
    pub backoff: Duration,
    /// Consecutive failures after which a preset creates nothing more; 0:
    /// no limit.
    pub failure_hard_limit: u32,
}

impl Default for PrebuildsConfig {
    fn default() -> Self {
        PrebuildsConfig {
            reconcile_interval: Duration::from_secs(60),
            backoff: Duration::from_secs(60),
            failure_hard_limit: 3,
        }
    }
}

/// What one round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundReport {
    pub created: usize,
    pub deleted: usize,
    pub canceled: usize,
    pub notified: usize,
    /// Actions the door refused or that failed (logged one by one).
    pub failed: usize,
}

/// The prebuild pools; cheap to clone.
#[derive(Clone)]
pub struct Prebuilds {
    inner: Arc<PrebuildsParts>,
}

/// What [`Prebuilds`] holds.
pub(crate) struct PrebuildsParts {
    pub(crate) store: Store,
    pub(crate) clock: Clock,
    pub(crate) metrics: Metrics,
    pub(crate) config: PrebuildsConfig,
    /// This server, for the reconciler's lease.
    pub(crate) server_id: String,
    /// A prebuild whose agent was not heard from within this is not ready.
    pub(crate) agent_heartbeat: Duration,
    /// Whether the prebuilds budget holds pools back (`--quota-enforce`).
    pub(crate) quota_enforce: bool,
    pub(crate) templates: Arc<Templates>,
    pub(crate) builds: Builds,
    pub(crate) build_log: BuildLog,
    pub(crate) notifications: Notifications,
    pub(crate) audit: Audit,
}

/// The loop: a round every `reconcile_interval`, on the lease holder only.
pub(crate) async fn reconciler(prebuilds: Prebuilds, mut shutdown: watch::Receiver<bool>) {
    let interval = prebuilds.inner.config.reconcile_interval;
    // Every hard limit told by this process, so that a limited preset is
    // not written to the outbox again every round (the outbox would drop
    // the copies, but it need not be asked).
    let told = Mutex::new(HashSet::new());
    loop {
        if *shutdown.borrow() {
            break;
        }
        let lease = millis(interval.saturating_mul(3));
        let server = prebuilds.inner.server_id.clone();
        match prebuilds
            .inner
            .store
            .try_lease(RECONCILER_LEASE, &server, lease)
            .await
        {
            Ok(true) => {
                if let Err(error) = prebuilds.reconcile_with(&told).await {
                    tracing::error!(%error, "prebuild reconciliation failed");
                }
            }
            Ok(false) => tracing::debug!("another server reconciles the prebuilds"),
            Err(error) => tracing::error!(%error, "cannot take the prebuilds lease"),
        }
        prebuilds
            .inner
            .metrics
            .background_pass(abode_metrics::PASS_PREBUILDS);
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => {}
        }
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl Prebuilds {
    pub(crate) fn new(parts: PrebuildsParts) -> Prebuilds {
        Prebuilds {
            inner: Arc::new(parts),
        }
    }

    fn templates(&self) -> &Templates {
        &self.inner.templates
    }

    fn builds(&self) -> &Builds {
        &self.inner.builds
    }

    fn build_log(&self) -> &BuildLog {
        &self.inner.build_log
    }

    fn notifications(&self) -> &Notifications {
        &self.inner.notifications
    }

    fn settings(&self) -> Settings {
        let config = &self.inner.config;
        Settings {
            backoff: config.backoff,
            failure_hard_limit: config.failure_hard_limit,
        }
    }

    /// The decision on the pools as they are now (read, not carried out).
    pub(crate) async fn decision(&self) -> Result<Decision, ControlError> {
        let now = self.inner.clock.now_ms();
        let heartbeat_before = now.saturating_sub(millis(self.inner.agent_heartbeat));
        let rows = self
            .inner
            .store
            .prebuild_snapshot(SystemActor::Prebuilds.user_id(), heartbeat_before)
            .await?;
        let snapshot = snapshot::decision_input(rows, self.inner.quota_enforce)?;
        Ok(abode_prebuilds::decide(
            &snapshot,
            &self.settings(),
            crate::times::utc_datetime(now),
        ))
    }

    /// One round of reconciliation, now (the loop's round; tests call it
    /// instead of waiting for the loop).
    pub async fn reconcile(&self) -> Result<RoundReport, ControlError> {
        self.reconcile_with(&Mutex::new(HashSet::new())).await
    }

    async fn reconcile_with(
        &self,
        told: &Mutex<HashSet<(String, String)>>,
    ) -> Result<RoundReport, ControlError> {
        let decision = self.decision().await?;
        let mut report = RoundReport::default();
        for action in &decision.actions {
            let done = match action {
                Action::Create {
                    version_id,
                    preset_name,
                } => self
                    .create(version_id, preset_name)
                    .await
                    .map(|()| report.created += 1),
                Action::Delete {
                    workspace_id,
                    reason,
                } => self
                    .delete(workspace_id, reason.as_str())
                    .await
                    .map(|()| report.deleted += 1),
                Action::CancelBuild {
                    build_id,
                    workspace_id,
                } => self
                    .cancel_build(build_id, workspace_id)
                    .await
                    .map(|()| report.canceled += 1),
                Action::NotifyQuotaLimited {
                    template_id,
                    version_id,
                    preset_name,
                } => self
                    .tell_quota_episode(&decision, template_id, version_id, preset_name, true)
                    .await
                    .map(|told| report.notified += usize::from(told)),
                Action::NotifyQuotaRecovered {
                    template_id,
                    version_id,
                    preset_name,
                } => self
                    .tell_quota_episode(&decision, template_id, version_id, preset_name, false)
                    .await
                    .map(|told| report.notified += usize::from(told)),
                Action::NotifyHardLimited {
                    version_id,
                    preset_name,
                    ..
                } => {
                    let key = (version_id.clone(), preset_name.clone());
                    let first = told.lock().map(|mut told| told.insert(key)).unwrap_or(true);
                    if first {
                        self.tell_hard_limited(version_id, preset_name)
                            .await
                            .map(|()| report.notified += 1)
                    } else {
                        Ok(())
                    }
                }
            };
            if let Err(error) = done {
                report.failed += 1;
                tracing::warn!(?action, %error, "a prebuild action failed");
            }
        }
        Ok(report)
    }

    async fn create(&self, version_id: &str, preset_name: &str) -> Result<(), ControlError> {
        let version = self.inner.store.template_version_by_id(version_id).await?;
        let template = self.templates().template(&version.template_name).await?;
        let owner = self
            .inner
            .store
            .user_by_id(SystemActor::Prebuilds.user_id())
            .await?;
        let preset = crate::presets::stored_presets(&version)?
            .into_iter()
            .find(|preset| preset.name == preset_name)
            .ok_or_else(|| {
                ControlError::Conflict(format!(
                    "version {} of template \"{}\" has no preset \"{preset_name}\"",
                    version.number, template.name
                ))
            })?;
        let parameters: BTreeMap<String, Value> = preset
            .parameters
            .iter()
            .map(|(name, value)| (name.clone(), Value::String(value.clone())))
            .collect();
        self.builds()
            .request(
                BuildTarget::New {
                    name: prebuild_name(),
                    owner,
                    template,
                    preset: Some(preset_name.to_string()),
                },
                BuildOrder {
                    actor: Actor::System(SystemActor::Prebuilds),
                    request_id: None,
                    transition: Transition::Start,
                    version: VersionChoice::Number(version.number),
                    reason: BuildReason::Prebuild,
                    parameters,
                    retention: None,
                    rename_to: None,
                    then_start: false,
                },
            )
            .await?;
        Ok(())
    }

    async fn delete(&self, workspace_id: &str, why: &str) -> Result<(), ControlError> {
        let workspace = self.inner.store.workspace_by_id(workspace_id).await?;
        let build = self
            .builds()
            .request(
                BuildTarget::Existing(workspace),
                BuildOrder {
                    actor: Actor::System(SystemActor::Prebuilds),
                    request_id: None,
                    transition: Transition::Delete,
                    version: VersionChoice::Current,
                    reason: BuildReason::Prebuild,
                    parameters: BTreeMap::new(),
                    retention: None,
                    rename_to: None,
                    then_start: false,
                },
            )
            .await?;
        self.build_log()
            .note(
                &build.id,
                &LogStage::SETUP,
                LogLevel::Info,
                &format!(
                    "deleting a prebuilt workspace of its pool: {}",
                    why.replace('_', " ")
                ),
            )
            .await;
        Ok(())
    }

    async fn cancel_build(&self, build_id: &str, workspace_id: &str) -> Result<(), ControlError> {
        let message = "canceled by prebuilds: its template version is no longer active";
        if self
            .inner
            .store
            .cancel_pending_build(build_id, message)
            .await?
        {
            self.build_log()
                .note(build_id, &LogStage::SETUP, LogLevel::Warn, message)
                .await;
            self.build_log().written();
            tracing::info!(build = %build_id, workspace = %workspace_id, "{message}");
        }
        Ok(())
    }

    async fn tell_hard_limited(
        &self,
        version_id: &str,
        preset_name: &str,
    ) -> Result<(), ControlError> {
        let version = self.inner.store.template_version_by_id(version_id).await?;
        let template = self.templates().template(&version.template_name).await?;
        let limit = self.inner.config.failure_hard_limit;
        self.notifications()
            .notify_preset_hard_limited(
                &template,
                preset_name,
                &format!("{limit} prebuild builds in a row failed"),
            )
            .await
    }

    /// Opens (`limited`) or ends the budget episode of a preset, telling
    /// template admins in the same transaction; whether this call did it
    /// (another server's round may have).
    async fn tell_quota_episode(
        &self,
        decision: &Decision,
        template_id: &str,
        version_id: &str,
        preset_name: &str,
        limited: bool,
    ) -> Result<bool, ControlError> {
        let version = self.inner.store.template_version_by_id(version_id).await?;
        let template = self.templates().template(&version.template_name).await?;
        let pool = decision
            .presets
            .iter()
            .find(|pool| pool.version_id == version_id && pool.preset_name == preset_name);
        let present = pool.map_or(0, |pool| pool.running + pool.in_progress);
        let desired = pool.map_or(0, |pool| pool.desired);
        let cost = pool.and_then(|pool| pool.estimated_cost);
        let notices = self
            .notifications()
            .preset_quota_notices(&template, preset_name, limited, desired, present, cost)
            .await;
        let told = self
            .inner
            .store
            .set_prebuild_quota_episode(template_id, preset_name, limited, &notices)
            .await?;
        if told {
            if limited {
                tracing::warn!(
                    template = %template.name,
                    preset = %preset_name,
                    desired,
                    present,
                    "the prebuilds budget holds the pool below its desired count"
                );
            } else {
                tracing::info!(
                    template = %template.name,
                    preset = %preset_name,
                    "the prebuilds budget no longer holds the pool back"
                );
            }
        }
        Ok(told)
    }

    /// The pools of every template (or of `template`), as `abode prebuilds
    /// status` shows them. Template admins and owners.
    pub async fn status(
        &self,
        caller: &Caller,
        template: Option<&str>,
    ) -> Result<Vec<PoolStatus>, ControlError> {
        caller.authorize(Permission::PrebuildsRead, None)?;
        if let Some(name) = template {
            self.templates().template(name).await?;
        }
        let decision = self.decision().await?;
        Ok(decision
            .presets
            .iter()
            .filter(|pool| template.is_none_or(|name| pool.template_name == name))
            .map(PoolStatus::from)
            .collect())
    }

    /// `abode prebuilds pause` (`paused`) or `resume`: owners only. While
    /// paused nothing is created or deleted; running builds finish.
    pub async fn set_paused(&self, caller: &Caller, paused: bool) -> Result<(), ControlError> {
        caller.authorize(Permission::PrebuildsPause, None)?;
        self.inner
            .store
            .set_platform_setting(PREBUILDS_PAUSED, if paused { "true" } else { "false" })
            .await?;
        let event = audit_event(
            Some(&caller.user),
            caller.request_id.clone(),
            if paused {
                "prebuilds.pause"
            } else {
                "prebuilds.resume"
            },
            "prebuilds",
            "prebuilds",
            "success",
            None,
        );
        self.inner.audit.record(&event).await;
        Ok(())
    }

    /// Reads the pools for the refreshed gauges.
    pub async fn refresh_pool_gauges(&self) -> Result<(), ControlError> {
        let decision = self.decision().await?;
        let pools: Vec<abode_metrics::PoolGauges> = decision
            .presets
            .iter()
            .map(|pool| abode_metrics::PoolGauges {
                template_name: pool.template_name.clone(),
                preset_name: pool.preset_name.clone(),
                desired: count(pool.desired),
                running: count(pool.running),
                eligible: count(pool.ready),
                hard_limited: pool.hard_limited,
                quota_limited: pool.quota_limited,
                paused: pool.paused,
            })
            .collect();
        self.inner.metrics.set_pools(&pools);
        Ok(())
    }
}

fn count(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A prebuilt workspace's name until it is claimed: `prebuild-` and eight
/// random lowercase hex digits (what names allow, and recognisable).
fn prebuild_name() -> String {
    let bytes: [u8; 4] = rand::random();
    format!("prebuild-{}", hex::encode(bytes))
}
