//! What the decision says: at most one action per workspace for the tick to
//! carry out, through the door as the `scheduler` actor, and the problems it
//! met (a stored schedule it cannot read, a workspace without its policy).

use chrono::{DateTime, Utc};

use crate::BuildReason;

/// The outcome of one tick.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// At most one per workspace, in the order of the snapshot's workspaces.
    pub actions: Vec<Action>,
    /// Workspaces left alone because their facts cannot be read, in the same
    /// order; for the server's log.
    pub problems: Vec<Problem>,
}

/// One thing to do to one workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A `stop` build.
    Stop {
        workspace_id: String,
        reason: StopReason,
    },
    /// A `start` build with reason `autostart`; `update`: on the template's
    /// active version (the template requires it and the workspace is not on
    /// it).
    Start { workspace_id: String, update: bool },
    /// Mark the workspace dormant (at the tick's time), with a `stop` build
    /// with reason `dormancy` when `stop_too`, and tell the owner
    /// (`workspace_dormant`) with `delete_at`, the deletion date the caller
    /// stores (`None`: the template does not delete dormant workspaces).
    MarkDormant {
        workspace_id: String,
        stop_too: bool,
        delete_at: Option<DateTime<Utc>>,
    },
    /// Tell the owner the workspace will be deleted at `at`
    /// (`workspace_deletion_scheduled`); the caller records when it did, and
    /// the deletion waits at least the notice from then.
    NotifyDeletionScheduled {
        workspace_id: String,
        at: DateTime<Utc>,
    },
    /// A `delete` build with reason `autodelete`: the guard treats it as the
    /// system's, not a person's, and holds it if it would destroy a protected
    /// resource.
    Delete { workspace_id: String },
}

/// Why the scheduler stops a workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// Its deadline (or hard deadline) passed.
    Autostop,
    /// Its start failed longer than the template's failure ttl ago.
    FailureTtl,
}

impl Action {
    pub fn workspace_id(&self) -> &str {
        match self {
            Action::Stop { workspace_id, .. }
            | Action::Start { workspace_id, .. }
            | Action::MarkDormant { workspace_id, .. }
            | Action::NotifyDeletionScheduled { workspace_id, .. }
            | Action::Delete { workspace_id } => workspace_id,
        }
    }

    /// The reason of the build this action asks for, if it asks for one.
    pub fn build_reason(&self) -> Option<BuildReason> {
        match self {
            Action::Stop {
                reason: StopReason::Autostop,
                ..
            } => Some(BuildReason::Autostop),
            Action::Stop {
                reason: StopReason::FailureTtl,
                ..
            } => Some(BuildReason::FailureTtl),
            Action::Start { .. } => Some(BuildReason::Autostart),
            Action::MarkDormant { stop_too: true, .. } => Some(BuildReason::Dormancy),
            Action::MarkDormant {
                stop_too: false, ..
            }
            | Action::NotifyDeletionScheduled { .. } => None,
            Action::Delete { .. } => Some(BuildReason::Autodelete),
        }
    }
}

/// A workspace the decision could not judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub workspace_id: String,
    pub message: String,
}
