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

    let mut actions: Vec<Planned> = Vec::new();
    let mut statuses = Vec::new();
    let mut seen: HashSet<PoolKey> = HashSet::new();
    for preset in &snapshot.presets {
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
                settings,
                snapshot.paused,
                now,
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

/// What a pool wants and may do.
struct PoolRule<'a> {
    desired: usize,
    ttl_seconds: i64,
    /// Where creations go, when creation is allowed.
    create: Option<PoolKey<'a>>,
}

impl PoolRule<'_> {
    /// A pool nobody declared (or declared without `prebuilds`): it wants none.
    fn unwanted() -> Self {
        PoolRule {
            desired: 0,
            ttl_seconds: 0,
            create: None,
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

fn reconcile_pool(
    preset: &PresetSnapshot,
    prebuilds: &PrebuildSettings,
    members: &[&PrebuiltWorkspace],
    settings: &Settings,
    paused: bool,
    now: DateTime<Utc>,
    actions: &mut Vec<Planned>,
) -> PresetStatus {
    let (desired, problem) = desired_instances(prebuilds, now);
    let restraint = restraint(&preset.failures, settings, now);
    let rule = PoolRule {
        desired,
        ttl_seconds: prebuilds.ttl_seconds,
        create: restraint
            .may_create()
            .then_some((preset.version_id.as_str(), preset.preset.name.as_str())),
    };
    let counts = plan_pool(members, &rule, now, actions);
    if restraint.hard_limited && !preset.failures.hard_limit_notified {
        actions.push(
            Action::NotifyHardLimited {
                template_id: preset.template_id.clone(),
                version_id: preset.version_id.clone(),
                preset_name: preset.preset.name.clone(),
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
        problem,
    }
}

/// Deletes what the pool cannot use, then brings its running count toward
/// `desired`: creations for what is missing, deletes of the oldest surplus.
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
    if let Some((version_id, preset_name)) = rule.create {
        let present = counts.running + counts.in_progress;
        for _ in present..rule.desired {
            actions.push(
                Action::Create {
                    version_id: version_id.to_string(),
                    preset_name: preset_name.to_string(),
                }
                .into(),
            );
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
    }
}
