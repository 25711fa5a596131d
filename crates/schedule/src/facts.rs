//! What the decision is made from: one row per workspace and the policy of
//! its template, as the tick reads them from the database.
//!
//! These types hold facts, not judgements: whether a workspace is running,
//! due to stop or in need of a person is the decision's to say, at the time
//! it is given.

use std::time::Duration;

use abode_contract::Transition;
use chrono::{DateTime, Utc};

use crate::Weekdays;

/// Everything one tick looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The policy of every template with a workspace in `workspaces`.
    pub templates: Vec<TemplatePolicy>,
    /// The live (not deleted) workspaces this server handles in this tick.
    pub workspaces: Vec<Workspace>,
}

/// A template's lifecycle policy (`abode templates edit T`). A zero duration
/// disables the rule it sets, except `activity_bump`, where it means that
/// activity does not move the deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplatePolicy {
    pub template_id: String,
    /// `--default-ttl`: autostop this long after a start.
    pub default_ttl: Duration,
    /// `--activity-bump`: activity pushes the deadline to activity + this.
    pub activity_bump: Duration,
    /// `--max-ttl`: a hard deadline after a start that activity cannot pass.
    pub max_ttl: Duration,
    /// `--autostart-days`: the days (in the schedule's time zone) on which
    /// autostart may start a workspace.
    pub autostart_days: Weekdays,
    /// `--allow-user-autostart`: owners' autostart schedules are followed.
    pub allow_user_autostart: bool,
    /// `--allow-user-autostop`: owners' ttl overrides the default ttl.
    pub allow_user_autostop: bool,
    /// `--failure-ttl`: stop a workspace whose start failed, after this long.
    pub failure_ttl: Duration,
    /// `--dormancy-threshold`: mark dormant after this long unused.
    pub dormancy_threshold: Duration,
    /// `--dormancy-auto-deletion`: delete a dormant workspace this long after
    /// it became dormant.
    pub dormancy_auto_deletion: Duration,
    /// `--require-active-version`: autostart updates to the active version.
    pub require_active_version: bool,
}

impl TemplatePolicy {
    /// The policy of a new template: no autostop, a 1 h activity bump, every
    /// day allowed, owners' schedules followed, nothing else enabled.
    pub fn new(template_id: impl Into<String>) -> Self {
        TemplatePolicy {
            template_id: template_id.into(),
            default_ttl: Duration::ZERO,
            activity_bump: Duration::from_secs(3600),
            max_ttl: Duration::ZERO,
            autostart_days: Weekdays::ALL,
            allow_user_autostart: true,
            allow_user_autostop: true,
            failure_ttl: Duration::ZERO,
            dormancy_threshold: Duration::ZERO,
            dormancy_auto_deletion: Duration::ZERO,
            require_active_version: false,
        }
    }
}

/// One workspace, its latest build and its owner's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    pub id: String,
    pub template_id: String,
    pub owner: OwnerStatus,
    /// Owned by the `prebuilds` system user: the pool manages it, never the
    /// scheduler.
    pub prebuilt: bool,
    /// `None` only for a workspace whose first build is not recorded yet.
    pub latest_build: Option<LatestBuild>,
    /// Whether its template version is the template's active version.
    pub on_active_version: bool,
    /// The owner's autostart schedule (`abode schedule start`), if any.
    pub autostart: Option<AutostartSchedule>,
    /// The owner's ttl (`abode schedule stop WS DURATION`), if any; used
    /// only when the template allows user autostop.
    pub ttl: Option<Duration>,
    /// When autostop is due: set at start, bumped by activity, moved by
    /// `abode schedule extend`. `None`: no autostop.
    pub deadline: Option<DateTime<Utc>>,
    /// The hard deadline of the current run (start + max ttl), if any.
    pub max_deadline: Option<DateTime<Utc>>,
    /// The last time the workspace was used (its creation until then).
    pub last_used_at: DateTime<Utc>,
    /// Set while the workspace is dormant.
    pub dormancy: Option<Dormancy>,
}

/// Whether the owner's account can act.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OwnerStatus {
    Active,
    Suspended,
}

/// The owner's autostart schedule, as stored (checked with
/// [`crate::validate_schedule`] when it was set).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AutostartSchedule {
    /// A 5-field cron: minute hour day-of-month month day-of-week.
    pub cron: String,
    /// An IANA time zone name the cron is read in.
    pub timezone: String,
}

/// The dormancy of a dormant workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dormancy {
    pub dormant_at: DateTime<Utc>,
    /// The deletion date stored when it became dormant (or later moved by
    /// a person). `None`: `dormant_at` + the template's auto-deletion.
    pub deleting_at: Option<DateTime<Utc>>,
    /// When the owner was told of the coming deletion
    /// (`workspace_deletion_scheduled`); `None` until then.
    pub deletion_notified_at: Option<DateTime<Utc>>,
}

/// The workspace's latest build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatestBuild {
    pub transition: Transition,
    pub status: BuildStatus,
    pub reason: BuildReason,
    /// The guard refused its plan: it failed without applying anything, and
    /// only a person can decide what to do next.
    pub blocked: bool,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// A build's status and reason: the contract's vocabulary, the types the
/// store reads (one definition; no conversion on the way in).
pub use abode_contract::{BuildReason, BuildStatus};
