//! The lifecycle scheduler's decision (issue 13): given what the database
//! says about each workspace (a [`Snapshot`]) and the tick's times, which
//! workspaces to stop, start, mark dormant, warn about or delete. It is pure
//! (no I/O, no clock, no database) so that every rule can be checked as a
//! table of facts; the server's tick reads the snapshot and carries out the
//! [`Action`]s through the door as the `scheduler` actor, with the reason
//! [`Action::build_reason`] names. [`deadlines_at_start`] and [`bump`] say
//! when a run's autostop is due, [`validate_schedule`] checks an owner's
//! autostart schedule the way the tick reads it. A tick loop that keeps a
//! [`ScheduleCache`] and calls [`decide_with`] parses each schedule once
//! instead of every tick; the decision is the same.
//!
//! # Rules
//!
//! Prebuilt workspaces (owned by the `prebuilds` user) are never touched.
//! Otherwise the latest build says where the workspace is:
//!
//! - pending or running, or held awaiting confirmation: nothing happens;
//! - **needs a person**: the guard blocked the latest build (whoever asked),
//!   or a scheduler build (autostart, autostop, failure_ttl, dormancy,
//!   autodelete) was canceled (a held one expired or was refused) or failed;
//!   nothing automated happens until a person's build, except the two retries
//!   the issue allows: a failed autostart still gets its failure-ttl stop,
//!   and a failed autodelete is retried [`Settings::deletion_retry`] (24 h)
//!   after it ended;
//! - running (a start succeeded), stopped (a stop succeeded, or a person's
//!   build was canceled), start failed (a person's or autostart's), or
//!   unsettled (a person's stop or delete failed).
//!
//! Then, in this order, the first rule that applies gives the one action:
//!
//! 1. **Autostop**: running, and the deadline or the hard (max) deadline is
//!    at or before now → [`Action::Stop`] ([`StopReason::Autostop`]). A
//!    suspended owner's workspace is still stopped.
//! 2. **Autostart**: stopped, owner active, not dormant, the template allows
//!    user autostart, and the owner's cron has an occurrence in
//!    `(max(previous tick, latest build's creation), now]`, in the schedule's
//!    time zone, on a day of the template's `autostart_days` →
//!    [`Action::Start`], with `update` when the template requires the active
//!    version and the workspace is not on it. Each occurrence is thus due in
//!    exactly one tick, and a person's build after the occurrence wins over
//!    it. A schedule that does not parse is a [`Problem`], not an action.
//! 3. **Failure ttl**: the latest start failed at least `failure_ttl` ago →
//!    [`Action::Stop`] ([`StopReason::FailureTtl`]).
//! 4. **Dormancy**: running, stopped, start failed or unsettled, not dormant,
//!    and unused (`last_used_at`) for at least `dormancy_threshold` →
//!    [`Action::MarkDormant`], stopping it when running or its start failed,
//!    with `delete_at` = now + `dormancy_auto_deletion`.
//! 5. **Dormant deletion** (dormant, in one of the states of rule 4 or a
//!    failed autodelete, and the template's `dormancy_auto_deletion` is on):
//!    the deletion date is the stored `deleting_at`, else `dormant_at` + the
//!    auto-deletion. From [`Settings::deletion_notice`] (a day) before it,
//!    the owner is told once ([`Action::NotifyDeletionScheduled`], at the
//!    later of the date and now + the notice); the [`Action::Delete`] comes
//!    at the later of the date and notice time + the notice, so an owner
//!    always has the notice's length of warning, even when the policy
//!    changed late.
//!
//! A zero duration turns its rule off (no ttl: no autostop unless a max ttl
//! is set). The decision of a workspace depends only on its own facts, its
//! template's policy and the [`Tick`].
//!
//! Tested as tables (`tests/`); `benches/decide.rs` times a tick over 10,000
//! workspaces.

mod cache;
mod cron;
mod deadline;
mod decide;
mod decision;
mod facts;
mod weekdays;

use std::time::Duration;

use chrono::{DateTime, Utc};

pub use cache::ScheduleCache;
pub use cron::{validate_schedule, Schedule, ScheduleError};
pub use deadline::{bump, deadlines_at_start, Deadlines};
pub use decide::{decide, decide_with, decide_workspace};
pub use decision::{Action, Decision, Problem, StopReason};
pub use facts::{
    AutostartSchedule, BuildReason, BuildStatus, Dormancy, LatestBuild, OwnerStatus, Snapshot,
    TemplatePolicy, Workspace,
};
pub use weekdays::{UnknownWeekday, Weekdays};

/// The times of one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    pub now: DateTime<Utc>,
    /// When the previous tick decided (on any server); on a server's first
    /// tick, now minus the poll interval. Autostart occurrences after it and
    /// up to `now` are due in this tick.
    pub previous: DateTime<Utc>,
    pub settings: Settings,
}

/// The server's settings of the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// How long before a dormant workspace's deletion its owner is told, and
    /// the least warning an owner gets (default 24 h).
    pub deletion_notice: Duration,
    /// How long after a failed scheduler deletion it is tried again
    /// (default 24 h).
    pub deletion_retry: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            deletion_notice: Duration::from_secs(24 * 3600),
            deletion_retry: Duration::from_secs(24 * 3600),
        }
    }
}
