//! From stored rows to the decision's input, and from the decision's pool
//! statuses to what the API shows.
//!
//! The store hands back facts as it keeps them (statuses, Unix ms, JSON);
//! the decision wants them judged into states (in progress, held, running
//! and ready, stopped, failed). The judgement is here, once.

use std::collections::{HashMap, HashSet};

use crate::times::utc_datetime as utc;
use abode_contract::presets::PresetDefinition;
use abode_prebuilds::{
    FailureHistory, PrebuildState, PrebuiltWorkspace, PresetSnapshot, PresetStatus, Snapshot,
};
use abode_store::{BuildStatus, PrebuildRow, PrebuildSnapshot, Transition};
use serde::Serialize;

use crate::ControlError;

fn unreadable(what: &str, error: serde_json::Error) -> ControlError {
    ControlError::Internal(format!(
        "the stored presets of {what} are not readable: {error}"
    ))
}

/// The decision's input from the store's snapshot; `enforce`:
/// `--quota-enforce`, which gives the pools the `prebuilds` actor's budget.
pub(crate) fn decision_input(
    rows: PrebuildSnapshot,
    enforce: bool,
) -> Result<Snapshot, ControlError> {
    let pool_costs: HashMap<(&str, &str), i64> = rows
        .pool_costs
        .iter()
        .map(|pool| {
            (
                (pool.version_id.as_str(), pool.preset_name.as_str()),
                pool.daily_cost,
            )
        })
        .collect();
    let episodes: HashSet<(&str, &str)> = rows
        .quota_episodes
        .iter()
        .map(|episode| (episode.template_id.as_str(), episode.preset_name.as_str()))
        .collect();
    let costs: HashMap<&str, i64> = rows
        .costs
        .iter()
        .map(|cost| (cost.workspace_id.as_str(), cost.daily_cost))
        .collect();
    let budget = enforce.then(|| {
        rows.allowances
            .iter()
            .fold(0i64, |sum, group| sum.saturating_add(group.allowance))
    });
    let failures: HashMap<(&str, &str), FailureHistory> = rows
        .failures
        .iter()
        .map(|pool| {
            (
                (pool.version_id.as_str(), pool.preset_name.as_str()),
                FailureHistory {
                    consecutive_failures: u32::try_from(pool.consecutive_failures.max(0))
                        .unwrap_or(u32::MAX),
                    last_failure_at: pool.last_failure_at.map(utc),
                    // Told once per episode by the outbox's dedupe (see
                    // `notify_preset_hard_limited`), not by a stored flag.
                    hard_limit_notified: false,
                },
            )
        })
        .collect();
    let mut presets = Vec::new();
    for version in &rows.versions {
        let declared: Vec<PresetDefinition> =
            serde_json::from_str(&version.presets).map_err(|error| {
                unreadable(
                    &format!(
                        "version {} of template \"{}\"",
                        version.version_number, version.template_name
                    ),
                    error,
                )
            })?;
        for preset in declared {
            let history = failures
                .get(&(version.version_id.as_str(), preset.name.as_str()))
                .cloned()
                .unwrap_or_default();
            let last_cost = pool_costs
                .get(&(version.version_id.as_str(), preset.name.as_str()))
                .copied();
            let quota_limited_notified =
                episodes.contains(&(version.template_id.as_str(), preset.name.as_str()));
            presets.push(PresetSnapshot {
                template_id: version.template_id.clone(),
                template_name: version.template_name.clone(),
                version_id: version.version_id.clone(),
                version_active: version.active,
                preset,
                failures: history,
                last_cost,
                quota_limited_notified,
                template_deprecated: version.deprecated,
            });
        }
    }
    let workspaces = rows
        .workspaces
        .iter()
        .filter_map(|row| prebuilt(row, costs.get(row.workspace_id.as_str()).copied()))
        .collect();
    Ok(Snapshot {
        presets,
        workspaces,
        paused: rows.paused,
        budget,
    })
}

/// A stored prebuilt workspace, which counts `daily_cost` against the
/// budget, as the decision sees it; `None` for one whose delete already
/// succeeded (it is on its way out of the snapshot).
fn prebuilt(row: &PrebuildRow, daily_cost: Option<i64>) -> Option<PrebuiltWorkspace> {
    let state = match row.build_status {
        BuildStatus::Pending | BuildStatus::Running => PrebuildState::InProgress {
            build_id: row.build_id.clone(),
            transition: row.build_transition,
            pending: row.build_queued,
        },
        BuildStatus::AwaitingConfirmation => PrebuildState::Held {
            build_id: row.build_id.clone(),
        },
        BuildStatus::Succeeded => match row.build_transition {
            Transition::Start => PrebuildState::Running {
                ready: row.agents_ready == row.agents,
            },
            Transition::Stop => PrebuildState::Stopped,
            Transition::Delete => return None,
        },
        BuildStatus::Canceled => PrebuildState::Stopped,
        BuildStatus::Failed => PrebuildState::Failed {
            transition: row.build_transition,
        },
    };
    Some(PrebuiltWorkspace {
        workspace_id: row.workspace_id.clone(),
        version_id: row.version_id.clone(),
        preset_name: row.preset_name.clone().unwrap_or_default(),
        created_at: utc(row.created_at),
        state,
        daily_cost,
    })
}

/// One pool as `abode prebuilds status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolStatus {
    pub template: String,
    pub preset: String,
    pub version_id: String,
    pub desired: usize,
    pub running: usize,
    pub ready: usize,
    pub in_progress: usize,
    pub expired: usize,
    pub failed: usize,
    pub consecutive_failures: u32,
    pub hard_limited: bool,
    pub paused: bool,
    /// Unix ms; no creation before it.
    pub backing_off_until: Option<i64>,
    /// The `prebuilds` budget keeps the pool below `desired`
    /// (`--quota-enforce`).
    pub quota_limited: bool,
    /// What one more prebuild of the pool is expected to cost a day (the
    /// plan of its newest costed prebuild build); `null` until one is known.
    pub estimated_cost: Option<i64>,
    /// Why the preset's schedules were ignored, if they were.
    pub problem: Option<String>,
}

impl From<&PresetStatus> for PoolStatus {
    fn from(pool: &PresetStatus) -> Self {
        PoolStatus {
            template: pool.template_name.clone(),
            preset: pool.preset_name.clone(),
            version_id: pool.version_id.clone(),
            desired: pool.desired,
            running: pool.running,
            ready: pool.ready,
            in_progress: pool.in_progress,
            expired: pool.expired,
            failed: pool.failed,
            consecutive_failures: pool.consecutive_failures,
            hard_limited: pool.hard_limited,
            paused: pool.paused,
            backing_off_until: pool.backing_off_until.map(|time| time.timestamp_millis()),
            quota_limited: pool.quota_limited,
            estimated_cost: pool.estimated_cost,
            problem: pool.problem.clone(),
        }
    }
}
