//! What failed prebuild builds hold back: a backoff that grows with each
//! consecutive failure, and a hard limit after which nothing more is created.
//!
//! A template that cannot build would otherwise start a new failing build on
//! every reconciliation, for every missing instance.

use chrono::{DateTime, TimeDelta, Utc};

use crate::snapshot::FailureHistory;
use crate::Settings;

/// How a preset's failures restrict creation at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Restraint {
    pub hard_limited: bool,
    /// Set while backing off: `last_failure_at + backoff * consecutive_failures`.
    pub backing_off_until: Option<DateTime<Utc>>,
}

impl Restraint {
    pub fn may_create(&self) -> bool {
        !self.hard_limited && self.backing_off_until.is_none()
    }
}

pub(crate) fn restraint(
    failures: &FailureHistory,
    settings: &Settings,
    now: DateTime<Utc>,
) -> Restraint {
    let hard_limited = settings.failure_hard_limit > 0
        && failures.consecutive_failures >= settings.failure_hard_limit;
    let backing_off_until = match failures.last_failure_at {
        Some(last) if failures.consecutive_failures > 0 => Some(backoff_end(
            last,
            settings.backoff,
            failures.consecutive_failures,
        )),
        _ => None,
    }
    .filter(|until| *until > now);
    Restraint {
        hard_limited,
        backing_off_until,
    }
}

/// `last + backoff * failures`; a product beyond what a time can hold means
/// never (the latest representable time), not an overflow.
fn backoff_end(last: DateTime<Utc>, backoff: std::time::Duration, failures: u32) -> DateTime<Utc> {
    TimeDelta::from_std(backoff)
        .ok()
        .and_then(|step| step.checked_mul(i32::try_from(failures).ok()?))
        .and_then(|wait| last.checked_add_signed(wait))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}
