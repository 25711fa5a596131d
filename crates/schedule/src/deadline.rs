//! When a running workspace is stopped: the deadline set at start, pushed by
//! activity, and never past the hard deadline of the template's max ttl.
//! The store keeps both times; the decision only compares them with now.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use crate::TemplatePolicy;

/// The deadlines of one run of a workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// When autostop is due; `None`: never (no ttl and no max ttl).
    pub deadline: Option<DateTime<Utc>>,
    /// The hard deadline that activity and extensions cannot pass; `None`:
    /// the template has no max ttl.
    pub max_deadline: Option<DateTime<Utc>>,
}

/// The deadlines of a run that started at `started_at`. The ttl is the
/// owner's (`workspace_ttl`) when the template allows user autostop and the
/// owner set one, else the template's default; a zero ttl means no autostop
/// except the hard deadline of a max ttl, which always applies.
pub fn deadlines_at_start(
    started_at: DateTime<Utc>,
    policy: &TemplatePolicy,
    workspace_ttl: Option<Duration>,
) -> Deadlines {
    let ttl = match workspace_ttl {
        Some(ttl) if policy.allow_user_autostop => ttl,
        _ => policy.default_ttl,
    };
    let max_deadline = after(started_at, policy.max_ttl);
    let deadline = match (after(started_at, ttl), max_deadline) {
        (Some(deadline), Some(max)) => Some(deadline.min(max)),
        (deadline, max) => deadline.or(max),
    };
    Deadlines {
        deadline,
        max_deadline,
    }
}

/// The deadline after activity at `activity_at`: pushed to activity +
/// `activity_bump`, never past `max_deadline`, never earlier than it was. A
/// workspace without a deadline keeps none: activity does not create one.
pub fn bump(
    deadline: Option<DateTime<Utc>>,
    max_deadline: Option<DateTime<Utc>>,
    activity_at: DateTime<Utc>,
    activity_bump: Duration,
) -> Option<DateTime<Utc>> {
    let deadline = deadline?;
    let Some(pushed) = after(activity_at, activity_bump) else {
        return Some(deadline);
    };
    let pushed = max_deadline.map_or(pushed, |max| pushed.min(max));
    Some(deadline.max(pushed))
}

/// `at + duration`; `None` for a zero duration (the rule is off). A duration
/// beyond chrono's range saturates to the latest representable time.
pub(crate) fn after(at: DateTime<Utc>, duration: Duration) -> Option<DateTime<Utc>> {
    if duration.is_zero() {
        return None;
    }
    Some(
        at.checked_add_signed(delta(duration))
            .unwrap_or(DateTime::<Utc>::MAX_UTC),
    )
}

/// `at + duration`, saturating at the latest representable time.
pub(crate) fn later(at: DateTime<Utc>, duration: Duration) -> DateTime<Utc> {
    at.checked_add_signed(delta(duration))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// `at - duration`, saturating at the earliest representable time.
pub(crate) fn earlier(at: DateTime<Utc>, duration: Duration) -> DateTime<Utc> {
    at.checked_sub_signed(delta(duration))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// A std duration as a chrono delta, saturating.
fn delta(duration: Duration) -> TimeDelta {
    TimeDelta::from_std(duration).unwrap_or(TimeDelta::MAX)
}
