//! What the decision is made from: the presets, the prebuilt workspaces and
//! the platform's pause, as read from the database in one transaction.
//!
//! These types hold facts, not judgements: whether a workspace is expired,
//! extraneous or backing off is the decision's to say, at the time it is given.

use abode_contract::presets::PresetDefinition;
use abode_contract::Transition;
use chrono::{DateTime, Utc};

/// Everything one reconciliation looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The presets of every active version, and of the inactive versions that
    /// still have prebuilt workspaces (a workspace whose version is not known
    /// to be active is treated as belonging to an inactive version, so listing
    /// the inactive ones is optional).
    pub presets: Vec<PresetSnapshot>,
    /// Every live (not deleted) workspace owned by the `prebuilds` actor.
    pub workspaces: Vec<PrebuiltWorkspace>,
    /// `abode prebuilds pause`: statuses are still computed, nothing is done.
    pub paused: bool,
    /// The `prebuilds` actor's daily budget (the sum of its groups'
    /// allowances) when quotas are enforced; `None`: no budget applies.
    pub budget: Option<i64>,
}

/// One preset of one template version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PresetSnapshot {
    pub template_id: String,
    pub template_name: String,
    pub version_id: String,
    /// Whether this version is its template's active version.
    pub version_active: bool,
    pub preset: PresetDefinition,
    pub failures: FailureHistory,
    /// What the pool's next prebuild is expected to cost a day: the cost
    /// of the plan of its newest prebuild `start` build whose plan was
    /// costed (reserved, or refused by quota); `None` when none was.
    pub last_cost: Option<i64>,
    /// Whether template admins were told that the budget holds this preset
    /// (its template and preset name) below its desired count, in an
    /// episode not yet over. The caller records it with
    /// [`crate::Action::NotifyQuotaLimited`] and clears it with
    /// [`crate::Action::NotifyQuotaRecovered`].
    pub quota_limited_notified: bool,
    /// Whether its template is deprecated: the pool makes no new
    /// prebuilds (those it has stay until claimed or expired).
    pub template_deprecated: bool,
}

/// The prebuild builds of one version and preset that failed since the last
/// one that succeeded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailureHistory {
    /// Failed prebuild builds (creations) since the last successful one; 0
    /// after a success.
    pub consecutive_failures: u32,
    /// When the newest of those failures finished.
    pub last_failure_at: Option<DateTime<Utc>>,
    /// Whether template admins were already told that this preset hit the
    /// hard limit in the current episode of failures. The caller stores it
    /// when it sends [`crate::Action::NotifyHardLimited`] and clears it when a
    /// prebuild build succeeds (a new version starts with a fresh history).
    pub hard_limit_notified: bool,
}

/// A workspace of the `prebuilds` actor, waiting in its pool to be claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrebuiltWorkspace {
    pub workspace_id: String,
    /// The template version it was built from.
    pub version_id: String,
    /// The preset whose pool it belongs to.
    pub preset_name: String,
    pub created_at: DateTime<Utc>,
    pub state: PrebuildState,
    /// What it counts against the budget now: the cost of its newest build
    /// that has one and did not fail or get canceled (the store's rule for
    /// everyone's workspaces); `None` when no build of it has a cost yet.
    pub daily_cost: Option<i64>,
}

/// Where a prebuilt workspace is, from its latest build and its agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrebuildState {
    /// Its latest build is pending or running.
    InProgress {
        build_id: String,
        transition: Transition,
        /// Still waiting for a worker: it can be canceled before anything ran.
        pending: bool,
    },
    /// Its latest build is a held plan awaiting someone's confirmation.
    Held { build_id: String },
    /// Its latest build, a successful `start`, left it running.
    Running {
        /// Every agent of the workspace reports ready: it can be claimed.
        ready: bool,
    },
    /// Its latest build, a successful `stop`, or a canceled build, left it
    /// not running.
    Stopped,
    /// Its latest build failed.
    Failed {
        /// What the failed build tried to do.
        transition: Transition,
    },
}
