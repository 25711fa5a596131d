//! What the decision says: the actions for the loop to carry out, through the
//! door as the `prebuilds` actor, and the status of every pool for
//! `abode prebuilds status` and the metrics.

use chrono::{DateTime, Utc};

/// The outcome of one reconciliation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// In the order to carry them out: cancels, then deletes (which free
    /// resources), then creations, then notifications; see [`Action`].
    pub actions: Vec<Action>,
    /// One per preset with a `prebuilds` block of an active version, ordered by
    /// template name, template id, preset name and version id.
    pub presets: Vec<PresetStatus>,
}

/// One thing to do. Actions are ordered by kind (the order of the variants),
/// then: cancels by workspace id; deletes by reason (the order of
/// [`DeleteReason`]), then oldest first, then workspace id; creations and
/// notifications by version id and preset name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Cancel a prebuild build that no worker has picked up yet, because its
    /// version is no longer active. The workspace is deleted by a later
    /// reconciliation, once the cancel has left it idle.
    CancelBuild {
        build_id: String,
        workspace_id: String,
    },
    /// Delete a prebuilt workspace (a `delete` build).
    Delete {
        workspace_id: String,
        reason: DeleteReason,
    },
    /// Create one prebuilt workspace of this version and preset.
    Create {
        version_id: String,
        preset_name: String,
    },
    /// Tell the template's admins that this preset reached the failure hard
    /// limit. Emitted on every reconciliation while the preset is limited and
    /// its [`crate::FailureHistory::hard_limit_notified`] is false: the caller
    /// sets that flag when it records the notification.
    NotifyHardLimited {
        template_id: String,
        version_id: String,
        preset_name: String,
    },
    /// Tell the template's admins that the `prebuilds` budget holds this
    /// preset's pool below its desired count. Emitted while the pool is
    /// [`PresetStatus::quota_limited`] and
    /// [`crate::PresetSnapshot::quota_limited_notified`] is false: the
    /// caller records the episode with the notification.
    NotifyQuotaLimited {
        template_id: String,
        version_id: String,
        preset_name: String,
    },
    /// Tell the template's admins that the budget no longer holds this
    /// preset back. Emitted while the pool is not quota-limited (or quotas
    /// are no longer enforced) and its episode is recorded: the caller ends
    /// the episode with the notification.
    NotifyQuotaRecovered {
        template_id: String,
        version_id: String,
        preset_name: String,
    },
}

/// Why a prebuilt workspace is deleted, in the order deletes are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeleteReason {
    /// Its latest `start` or `stop` failed: it will never be claimable. (A
    /// failed `delete` is not retried: it needs a person.)
    Failed,
    /// It is stopped (someone stopped it, or its build was canceled): only
    /// running prebuilds can be claimed, and the pool never starts one again.
    Stopped,
    /// It is older than its preset's ttl.
    Expired,
    /// Its template version is no longer active.
    InactiveVersion,
    /// The pool has more running prebuilds than it wants (oldest go first),
    /// or its preset no longer wants a pool.
    Extraneous,
}

impl DeleteReason {
    /// The reason's name, for logs and build reasons.
    pub fn as_str(self) -> &'static str {
        match self {
            DeleteReason::Failed => "failed",
            DeleteReason::Stopped => "stopped",
            DeleteReason::Expired => "expired",
            DeleteReason::InactiveVersion => "inactive_version",
            DeleteReason::Extraneous => "extraneous",
        }
    }
}

/// The state of one pool: a preset with a `prebuilds` block of an active
/// version. Counts are of live prebuilt workspaces of that version and preset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresetStatus {
    pub template_id: String,
    pub template_name: String,
    pub version_id: String,
    pub preset_name: String,
    /// Instances wanted now: the matching schedule's, else the preset's.
    pub desired: usize,
    /// Running and not expired (ready or not): what the pool counts as present.
    pub running: usize,
    /// Running, not expired, every agent ready: what a claim can take.
    pub ready: usize,
    /// With a `start` build pending or running: counted toward `desired`.
    pub in_progress: usize,
    /// Running but older than the ttl: deleted and replaced.
    pub expired: usize,
    /// Whose latest build failed (deleted unless that build was a `delete`).
    pub failed: usize,
    pub consecutive_failures: u32,
    /// Nothing more is created until a prebuild build succeeds or a new
    /// version is pushed.
    pub hard_limited: bool,
    pub paused: bool,
    /// No creation before this time, after failures.
    pub backing_off_until: Option<DateTime<Utc>>,
    /// The `prebuilds` budget kept at least one wanted creation back.
    pub quota_limited: bool,
    /// What one more prebuild of the pool is expected to cost a day
    /// ([`crate::PresetSnapshot::last_cost`]).
    pub estimated_cost: Option<i64>,
    /// Why the preset's schedules were ignored (an unknown time zone or a
    /// cron the provider would refuse), so `desired` fell back to the
    /// preset's `instances`.
    pub problem: Option<String>,
}
