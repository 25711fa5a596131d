//! The decision itself: every prebuilt workspace is put in its pool (its
//! version and preset), each pool of an active version is brought toward the
//! instances it wants, and what belongs to no active pool is wound down.

use std::collections::{HashMap, HashSet};

use abode_contract::presets::PrebuildSettings;
use abode_contract::Transition;
use chrono::{DateTime, TimeDelta, Utc};

use crate::decision::{Action, Decision, DeleteReason, PresetStatus};
use crate::desired::desired_instances;
use crate::failures::restraint;
use crate::snapshot::{PrebuildState, PrebuiltWorkspace, PresetSnapshot, Snapshot};
use crate::Settings;

type PoolKey<'a> = (&'a str, &'a str);

/// See the crate's documentation for the rules.
pub fn decide(snapshot: &Snapshot, settings: &Settings, now: DateTime<Utc>) -> Decision {
    let mut pools: HashMap<PoolKey, Vec<&PrebuiltWorkspace>> = HashMap::new();
    for workspace in &snapshot.workspaces {
        pools
            .entry((&workspace.version_id, &workspace.preset_name))
            .or_default()
            .push(workspace);
    }
    let active_versions: HashSet<&str> = snapshot
        .presets
        .iter()
        .filter(|preset| preset.version_active)
        .map(|preset| preset.version_id.as_str())
        .collect();

    let mut budget = snapshot
        .budget
        .map(|allowance| allowance.saturating_sub(committed(snapshot)));
    // Pools take the budget in the order statuses are listed (a stable
    // sort: of a preset declared twice, the first declaration still counts).
    let mut order: Vec<&PresetSnapshot> = snapshot.presets.iter().collect();
    order.sort_by(|a, b| {
        (
            &a.template_name,
            &a.template_id,
            &a.preset.name,
            &a.version_id,
        )
            .cmp(&(
                &b.template_name,
                &b.template_id,
                &b.preset.name,
                &b.version_id,
            ))
    });
    let mut actions: Vec<Planned> = Vec::new();
    let mut statuses = Vec::new();
    let mut seen: HashSet<PoolKey> = HashSet::new();
    for preset in order {
        let key = (preset.version_id.as_str(), preset.preset.name.as_str());
        // A version cannot declare one preset twice; if a snapshot does, the
        // first declaration counts.
        if !preset.version_active || !seen.insert(key) {
            continue;
        }
        let members = pools.remove(&key).unwrap_or_default();
        match &preset.preset.prebuilds {
            Some(prebuilds) => statuses.push(reconcile_pool(
                preset,
                prebuilds,
                &members,
                &Round {
                    settings,
                    paused: snapshot.paused,
                    now,
                },
                &mut budget,
                &mut actions,
            )),
            None => {
                plan_pool(&members, &PoolRule::unwanted(), now, &mut actions);
            }
        }
    }
    // Left: workspaces of no declared pool. In an active version the preset
    // wants none; otherwise the version is not (known to be) active.
    for ((version_id, _), members) in pools {
        if active_versions.contains(version_id) {
            plan_pool(&members, &PoolRule::unwanted(), now, &mut actions);
        } else {
            wind_down(&members, &mut actions);
        }
    }

    if snapshot.paused {
        actions.clear();
    }
    actions.sort_by(|a, b| order_key(a).cmp(&order_key(b)));
    let actions = actions.into_iter().map(|planned| planned.action).collect();
    statuses.sort_by(|a, b| {
        (
            &a.template_name,
            &a.template_id,
            &a.preset_name,
            &a.version_id,
        )
            .cmp(&(
                &b.template_name,
                &b.template_id,
                &b.preset_name,
                &b.version_id,
            ))
    });
    Decision {
        actions,
        presets: statuses,
    }
}

/// What a pool wants.
struct PoolRule {
    desired: usize,
    ttl_seconds: i64,
}

impl PoolRule {
    /// A pool nobody declared (or declared without `prebuilds`): it wants none.
    fn unwanted() -> Self {
        PoolRule {
            desired: 0,
            ttl_seconds: 0,
        }
    }
}

/// What the `prebuilds` actor's workspaces count against its budget: each
/// its own cost, and a `start` still waiting for its plan its pool's
/// expected cost (0 when not known: its plan is judged by the quota step).
fn committed(snapshot: &Snapshot) -> i64 {
    let expected: HashMap<PoolKey, i64> = snapshot
        .presets
        .iter()
        .filter_map(|preset| {
            let key = (preset.version_id.as_str(), preset.preset.name.as_str());
            preset.last_cost.map(|cost| (key, cost))
        })
        .collect();
    snapshot.workspaces.iter().fold(0i64, |sum, workspace| {
        let cost = match (&workspace.daily_cost, &workspace.state) {
            (Some(cost), _) => *cost,
            (
                None,
                PrebuildState::InProgress {
                    transition: Transition::Start,
                    ..
                },
            ) => expected
                .get(&(
                    workspace.version_id.as_str(),
                    workspace.preset_name.as_str(),
                ))
                .copied()
                .unwrap_or(0),
            (None, _) => 0,
        };
        sum.saturating_add(cost)
    })
}

/// How many of `wanted` creations the budget (`remaining`, taken from as
/// they are granted) allows at `cost` each, and whether it kept any back.
/// An unknown cost creates one at a time, only while none of the pool is
/// building: its plan tells the cost, and the quota step refuses it if it
/// does not fit.
fn within_budget(
    wanted: usize,
    cost: Option<i64>,
    in_progress: usize,
    remaining: &mut Option<i64>,
) -> (usize, bool) {
    let Some(remaining) = remaining else {
        return (wanted, false);
    };
    match cost {
        None => (usize::from(wanted > 0 && in_progress == 0), false),
        Some(cost) => {
            let mut granted = 0;
            while granted < wanted && cost <= *remaining {
                *remaining = remaining.saturating_sub(cost);
                granted += 1;
            }
            (granted, granted < wanted)
        }
    }
}

#[derive(Default)]
struct Counts {
    running: usize,
    ready: usize,
    in_progress: usize,
    expired: usize,
    failed: usize,
}

/// What every pool of one decision shares.
struct Round<'a> {
    settings: &'a Settings,
    paused: bool,
    now: DateTime<Utc>,
}

/// One pool: its deletes, the creations its failures and what is left of
/// the budget (`budget`, taken from) allow, its notices and its status.
fn reconcile_pool(
    preset: &PresetSnapshot,
    prebuilds: &PrebuildSettings,
    members: &[&PrebuiltWorkspace],
    round: &Round,
    budget: &mut Option<i64>,
    actions: &mut Vec<Planned>,
) -> PresetStatus {
    let Round {
        settings,
        paused,
        now,
    } = *round;
    let (desired, problem) = desired_instances(prebuilds, now);
    let restraint = restraint(&preset.failures, settings, now);
    let rule = PoolRule {
        desired,
        ttl_seconds: prebuilds.ttl_seconds,
    };
    let counts = plan_pool(members, &rule, now, actions);
    let wanted = if restraint.may_create() && !preset.template_deprecated {
        desired.saturating_sub(counts.running + counts.in_progress)
    } else {
        0
    };
    let (creations, quota_limited) =
        within_budget(wanted, preset.last_cost, counts.in_progress, budget);
    for _ in 0..creations {
        actions.push(
            Action::Create {
                version_id: preset.version_id.clone(),
                preset_name: preset.preset.name.clone(),
            }
            .into(),
        );
    }
    let ids = || {
        (
            preset.template_id.clone(),
            preset.version_id.clone(),
            preset.preset.name.clone(),
        )
    };
    if restraint.hard_limited && !preset.failures.hard_limit_notified {
        let (template_id, version_id, preset_name) = ids();
        actions.push(
            Action::NotifyHardLimited {
                template_id,
                version_id,
                preset_name,
            }
            .into(),
        );
    }
    if quota_limited != preset.quota_limited_notified {
        let (template_id, version_id, preset_name) = ids();
        actions.push(
            if quota_limited {
                Action::NotifyQuotaLimited {
                    template_id,
                    version_id,
                    preset_name,
                }
            } else {
                Action::NotifyQuotaRecovered {
                    template_id,
                    version_id,
                    preset_name,
                }
            }
            .into(),
        );
    }
    PresetStatus {
        template_id: preset.template_id.clone(),
        template_name: preset.template_name.clone(),
        version_id: preset.version_id.clone(),
        preset_name: preset.preset.name.clone(),
        desired,
        running: counts.running,
        ready: counts.ready,
        in_progress: counts.in_progress,
        expired: counts.expired,
        failed: counts.failed,
        consecutive_failures: preset.failures.consecutive_failures,
        hard_limited: restraint.hard_limited,
        paused,
        backing_off_until: restraint.backing_off_until,
        quota_limited,
        estimated_cost: preset.last_cost,
        problem,
    }
}

/// Deletes what the pool cannot use and the oldest surplus beyond
/// `desired`; the creations of what is missing are the caller's (they
/// depend on failures and the budget).
///
/// Workspaces with a build in progress or held are never deleted. Starts in
/// progress count toward `desired` when creating but not when judging a
/// surplus: a running prebuild is never deleted in favour of one that has
/// not finished building (once it has, the next reconciliation deletes the
/// surplus).
fn plan_pool(
    members: &[&PrebuiltWorkspace],
    rule: &PoolRule,
    now: DateTime<Utc>,
    actions: &mut Vec<Planned>,
) -> Counts {
    let expires = |workspace: &PrebuiltWorkspace| {
        rule.ttl_seconds > 0
            && TimeDelta::try_seconds(rule.ttl_seconds)
                .and_then(|ttl| workspace.created_at.checked_add_signed(ttl))
                .is_some_and(|end| end <= now)
    };
    let mut counts = Counts::default();
    let mut alive: Vec<&PrebuiltWorkspace> = Vec::new();
    for workspace in members {
        let delete = match &workspace.state {
            PrebuildState::InProgress { transition, .. } => {
                if *transition == Transition::Start {
                    counts.in_progress += 1;
                }
                None
            }
            PrebuildState::Held { .. } => None,
            PrebuildState::Failed { transition } => {
                counts.failed += 1;
                (*transition != Transition::Delete).then_some(DeleteReason::Failed)
            }
            PrebuildState::Stopped => Some(DeleteReason::Stopped),
            PrebuildState::Running { .. } if expires(workspace) => {
                counts.expired += 1;
                Some(DeleteReason::Expired)
            }
            PrebuildState::Running { ready } => {
                counts.running += 1;
                if *ready {
                    counts.ready += 1;
                }
                alive.push(workspace);
                None
            }
        };
        if let Some(reason) = delete {
            actions.push(delete_action(workspace, reason));
        }
    }
    if counts.running > rule.desired {
        alive.sort_by(|a, b| (a.created_at, &a.workspace_id).cmp(&(b.created_at, &b.workspace_id)));
        for workspace in alive.iter().take(counts.running - rule.desired) {
            actions.push(delete_action(workspace, DeleteReason::Extraneous));
        }
    }
    counts
}

/// Workspaces of an inactive version: pending starts are canceled, idle
/// workspaces deleted; builds already running are left to finish (the next
/// reconciliation deletes what they leave), and a failed delete is not retried.
fn wind_down(members: &[&PrebuiltWorkspace], actions: &mut Vec<Planned>) {
    for workspace in members {
        match &workspace.state {
            PrebuildState::InProgress {
                build_id,
                transition: Transition::Start,
                pending: true,
            } => actions.push(
                Action::CancelBuild {
                    build_id: build_id.clone(),
                    workspace_id: workspace.workspace_id.clone(),
                }
                .into(),
            ),
            PrebuildState::InProgress { .. }
            | PrebuildState::Held { .. }
            | PrebuildState::Failed {
                transition: Transition::Delete,
            } => {}
            PrebuildState::Running { .. }
            | PrebuildState::Stopped
            | PrebuildState::Failed { .. } => {
                actions.push(delete_action(workspace, DeleteReason::InactiveVersion))
            }
        }
    }
}

fn delete_action(workspace: &PrebuiltWorkspace, reason: DeleteReason) -> Planned {
    Planned {
        action: Action::Delete {
            workspace_id: workspace.workspace_id.clone(),
            reason,
        },
        created_at: Some(workspace.created_at),
    }
}

/// An action with what orders it (see [`Action`]): deletes carry no time,
/// so the workspace's creation time rides along for "oldest first".
struct Planned {
    action: Action,
    created_at: Option<DateTime<Utc>>,
}

impl From<Action> for Planned {
    fn from(action: Action) -> Self {
        Planned {
            action,
            created_at: None,
        }
    }
}

type OrderKey<'a> = (u8, u8, Option<DateTime<Utc>>, &'a str, &'a str);

fn order_key(planned: &Planned) -> OrderKey<'_> {
    match &planned.action {
        Action::CancelBuild {
            build_id,
            workspace_id,
        } => (0, 0, None, workspace_id, build_id),
        Action::Delete {
            workspace_id,
            reason,
        } => (1, *reason as u8, planned.created_at, workspace_id, ""),
        Action::Create {
            version_id,
            preset_name,
        } => (2, 0, None, version_id, preset_name),
        Action::NotifyHardLimited {
            version_id,
            preset_name,
            ..
        } => (3, 0, None, version_id, preset_name),
        Action::NotifyQuotaLimited {
            version_id,
            preset_name,
            ..
        } => (4, 0, None, version_id, preset_name),
        Action::NotifyQuotaRecovered {
            version_id,
            preset_name,
            ..
        } => (5, 0, None, version_id, preset_name),
    }
}
