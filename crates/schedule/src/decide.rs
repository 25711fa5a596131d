//! The rules: one workspace, its template's policy and the tick in, at most
//! one action out. See the crate documentation for the rules in words.

use std::collections::HashMap;

use abode_contract::Transition;
use chrono::{DateTime, Datelike, Days, NaiveTime, TimeDelta, TimeZone, Utc};

use crate::cron::Schedule;
use crate::deadline::{after, earlier, later};
use crate::{
    Action, BuildReason, BuildStatus, Decision, LatestBuild, OwnerStatus, Problem, ScheduleCache,
    Snapshot, StopReason, TemplatePolicy, Tick, Workspace,
};

/// Decides the tick for every workspace of the snapshot.
pub fn decide(snapshot: &Snapshot, tick: &Tick) -> Decision {
    decide_with(snapshot, tick, &mut ScheduleCache::default())
}

/// [`decide`], reusing the schedules a previous tick parsed (the tick loop
/// keeps one [`ScheduleCache`]); the decision is the same.
pub fn decide_with(snapshot: &Snapshot, tick: &Tick, schedules: &mut ScheduleCache) -> Decision {
    schedules.begin();
    let policies: HashMap<&str, &TemplatePolicy> = snapshot
        .templates
        .iter()
        .map(|policy| (policy.template_id.as_str(), policy))
        .collect();
    let mut decision = Decision::default();
    for workspace in &snapshot.workspaces {
        let Some(policy) = policies.get(workspace.template_id.as_str()) else {
            decision.problems.push(Problem {
                workspace_id: workspace.id.clone(),
                message: format!("no policy for template `{}`", workspace.template_id),
            });
            continue;
        };
        match rules(workspace, policy, tick, schedules) {
            Ok(Some(action)) => decision.actions.push(action),
            Ok(None) => {}
            Err(message) => decision.problems.push(Problem {
                workspace_id: workspace.id.clone(),
                message,
            }),
        }
    }
    schedules.end();
    decision
}

/// Decides the tick for one workspace: its action, if any, or why its facts
/// cannot be judged (an autostart schedule that does not parse).
pub fn decide_workspace(
    workspace: &Workspace,
    policy: &TemplatePolicy,
    tick: &Tick,
) -> Result<Option<Action>, String> {
    rules(workspace, policy, tick, &mut ScheduleCache::default())
}

/// Where the latest build left the workspace, as far as the rules care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A build is pending or running: the next tick will see its outcome.
    Building,
    /// A build awaits a person's confirmation.
    Held,
    /// The guard blocked the latest build, or an automated build was
    /// canceled or failed in a way the scheduler does not retry: nothing
    /// automated happens until a person's build.
    NeedsPerson,
    Running,
    Stopped,
    Deleted,
    /// A start (a person's or autostart's) failed, at this time.
    StartFailed(DateTime<Utc>),
    /// A scheduler deletion failed, at this time.
    DeleteFailed(DateTime<Utc>),
    /// A person's stop or delete failed: the workspace may be half-built.
    Unsettled,
}

impl State {
    fn of(build: &LatestBuild) -> State {
        let ended = build.finished_at.unwrap_or(build.created_at);
        let scheduler = build.reason.is_scheduler();
        match build.status {
            BuildStatus::Pending | BuildStatus::Running => State::Building,
            BuildStatus::AwaitingConfirmation => State::Held,
            _ if build.blocked => State::NeedsPerson,
            BuildStatus::Succeeded => match build.transition {
                Transition::Start => State::Running,
                Transition::Stop => State::Stopped,
                Transition::Delete => State::Deleted,
            },
            BuildStatus::Canceled if scheduler => State::NeedsPerson,
            BuildStatus::Canceled => State::Stopped,
            BuildStatus::Failed => match build.transition {
                Transition::Start if !scheduler || build.reason == BuildReason::Autostart => {
                    State::StartFailed(ended)
                }
                // An expired retained resource's destroy is the scheduler's
                // delete too (no snapshot holds its deleted workspace).
                Transition::Delete
                    if matches!(
                        build.reason,
                        BuildReason::Autodelete | BuildReason::RetainedExpired
                    ) =>
                {
                    State::DeleteFailed(ended)
                }
                _ if scheduler => State::NeedsPerson,
                _ => State::Unsettled,
            },
        }
    }
}

fn rules(
    workspace: &Workspace,
    policy: &TemplatePolicy,
    tick: &Tick,
    schedules: &mut ScheduleCache,
) -> Result<Option<Action>, String> {
    if workspace.prebuilt {
        return Ok(None);
    }
    let Some(build) = &workspace.latest_build else {
        return Ok(None);
    };
    let state = State::of(build);
    let id = || workspace.id.clone();
    let now = tick.now;

    if state == State::Running && stop_due(workspace).is_some_and(|due| due <= now) {
        return Ok(Some(Action::Stop {
            workspace_id: id(),
            reason: StopReason::Autostop,
        }));
    }

    if state == State::Stopped
        && workspace.owner == OwnerStatus::Active
        && workspace.dormancy.is_none()
        && policy.allow_user_autostart
        && !policy.autostart_days.is_empty()
    {
        let since = tick.previous.max(build.created_at);
        if let (Some(autostart), true) = (&workspace.autostart, since < now) {
            let schedule = schedules
                .get(autostart)
                .map_err(|error| error.to_string())?;
            if due_between(schedule, policy, since, now) {
                return Ok(Some(Action::Start {
                    workspace_id: id(),
                    update: policy.require_active_version && !workspace.on_active_version,
                }));
            }
        }
    }

    if let State::StartFailed(failed_at) = state {
        if after(failed_at, policy.failure_ttl).is_some_and(|due| due <= now) {
            return Ok(Some(Action::Stop {
                workspace_id: id(),
                reason: StopReason::FailureTtl,
            }));
        }
    }

    let judged = matches!(
        state,
        State::Running | State::Stopped | State::StartFailed(_) | State::Unsettled
    );
    if judged
        && workspace.dormancy.is_none()
        && after(workspace.last_used_at, policy.dormancy_threshold).is_some_and(|due| due <= now)
    {
        return Ok(Some(Action::MarkDormant {
            workspace_id: id(),
            stop_too: matches!(state, State::Running | State::StartFailed(_)),
            delete_at: after(now, policy.dormancy_auto_deletion),
        }));
    }

    let deletable = judged || matches!(state, State::DeleteFailed(_));
    if let (Some(dormancy), true) = (&workspace.dormancy, deletable) {
        // Turning auto-deletion off stops every deletion, even stored ones.
        let Some(policy_delete_at) = after(dormancy.dormant_at, policy.dormancy_auto_deletion)
        else {
            return Ok(None);
        };
        let delete_at = dormancy.deleting_at.unwrap_or(policy_delete_at);
        let notice = tick.settings.deletion_notice;
        let Some(notified_at) = dormancy.deletion_notified_at else {
            if now >= earlier(delete_at, notice) {
                return Ok(Some(Action::NotifyDeletionScheduled {
                    workspace_id: id(),
                    at: delete_at.max(later(now, notice)),
                }));
            }
            return Ok(None);
        };
        let due = delete_at.max(later(notified_at, notice));
        let retry_wait_over = match state {
            State::DeleteFailed(failed_at) => later(failed_at, tick.settings.deletion_retry) <= now,
            _ => true,
        };
        if due <= now && retry_wait_over {
            return Ok(Some(Action::Delete { workspace_id: id() }));
        }
    }
    Ok(None)
}

/// When autostop is due: the earlier of the deadline and the hard deadline.
fn stop_due(workspace: &Workspace) -> Option<DateTime<Utc>> {
    match (workspace.deadline, workspace.max_deadline) {
        (Some(deadline), Some(max)) => Some(deadline.min(max)),
        (deadline, max) => deadline.or(max),
    }
}

/// Whether the schedule has an occurrence in `(since, until]` on a day (in
/// the schedule's time zone) the template allows.
fn due_between(
    schedule: &Schedule,
    policy: &TemplatePolicy,
    since: DateTime<Utc>,
    until: DateTime<Utc>,
) -> bool {
    let zone = schedule.timezone();
    let mut cursor = since;
    // Each step either finds a due occurrence or moves to a later local day,
    // so a long window (after an outage) ends within about a week of steps.
    for _ in 0..16 {
        let Some(next) = schedule.next_after(cursor) else {
            return false;
        };
        if next > until {
            return false;
        }
        let local = next.with_timezone(&zone);
        if policy.autostart_days.contains(local.weekday()) {
            return true;
        }
        // Skip the rest of a day the template does not allow.
        let Some(tomorrow) = local.date_naive().checked_add_days(Days::new(1)) else {
            return false;
        };
        let midnight = tomorrow.and_time(NaiveTime::MIN);
        // Where midnight falls in a daylight-saving gap, the day starts at 01:00.
        let start = zone.from_local_datetime(&midnight).earliest().or_else(|| {
            zone.from_local_datetime(&(midnight + TimeDelta::hours(1)))
                .earliest()
        });
        let Some(start) = start else {
            return false;
        };
        cursor = (start.with_timezone(&Utc) - TimeDelta::seconds(1)).max(next);
    }
    false
}
