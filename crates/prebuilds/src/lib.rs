//! The reconciliation decision of prebuilt workspaces (issue 12): given what
//! the database says (a [`Snapshot`]), the settings and the time, which
//! prebuilt workspaces to create, delete or cancel, and the status of every
//! pool. It is pure (no I/O, no clock, no database) so that every rule can be
//! checked as a table of snapshots; the server's loop reads the snapshot in
//! one transaction and carries out the [`Action`]s through the door as the
//! `prebuilds` actor.
//!
//! # Rules
//!
//! A *pool* is the prebuilt workspaces of one template version and preset.
//! Each preset with a `prebuilds` block of an active version is a pool that:
//!
//! - wants the instances of the schedule whose cron matches the current hour
//!   in the preset's time zone, else the preset's `instances` (see
//!   [`PresetStatus::problem`] for a definition that cannot be read);
//! - deletes its prebuilds whose latest `start`/`stop` failed
//!   ([`DeleteReason::Failed`]; a failed `delete` is left for a person), the
//!   stopped ones ([`DeleteReason::Stopped`]) and the running ones past the
//!   ttl (`created_at + ttl <= now`, ttl 0 never expires,
//!   [`DeleteReason::Expired`]);
//! - creates `desired - (running and not expired + starts in progress)`,
//!   unless it is backing off (after a failure, nothing until
//!   `last_failure_at + backoff * consecutive_failures`) or hard-limited
//!   (`consecutive_failures >= failure_hard_limit`, a limit of 0 disables it);
//! - deletes the oldest running ones beyond `desired`
//!   ([`DeleteReason::Extraneous`]); starts in progress do not count here, so
//!   a running prebuild never makes way for one still building;
//! - while hard-limited, asks for one notification per episode
//!   ([`Action::NotifyHardLimited`] while
//!   [`FailureHistory::hard_limit_notified`] is false).
//!
//! # The `prebuilds` budget
//!
//! With quotas enforced ([`Snapshot::budget`] set: the sum of the
//! `prebuilds` actor's groups' allowances), creations must fit what is left
//! of it:
//!
//! - every workspace of the `prebuilds` actor counts its own cost
//!   ([`PrebuiltWorkspace::daily_cost`], what the store counts for anyone's
//!   workspace); a `start` still waiting for its plan counts its pool's
//!   expected cost, [`PresetSnapshot::last_cost`] (the plan's cost of the
//!   pool's newest prebuild `start` that was costed, reserved or refused),
//!   0 when unknown. Deletes decided in the same round free their cost at
//!   the next one.
//! - pools take what is left in the order of their statuses (template
//!   name, template id, preset name, version id), each creation at its
//!   pool's expected cost. A creation that does not fit is not made, and
//!   the pool is [`PresetStatus::quota_limited`]. Nothing is deleted for
//!   the budget: a lowered allowance only stops creations.
//! - a pool whose cost is not known yet creates one prebuild at a time,
//!   while none of it is building: that build's plan tells the cost, and
//!   the server's quota step refuses it before apply if it does not fit.
//! - template admins are told once per episode: [`Action::NotifyQuotaLimited`]
//!   when a pool becomes quota-limited and
//!   [`PresetSnapshot::quota_limited_notified`] is false,
//!   [`Action::NotifyQuotaRecovered`] when it no longer is (or no budget
//!   applies any more) and it is true.
//!
//! A workspace with a build in progress or held is never deleted. Presets
//! without a `prebuilds` block are not pools: they have no status, and a
//! prebuilt workspace of one (or of a preset its version does not declare)
//! is extraneous. Workspaces of a version not known to be active are wound
//! down: their pending `start` builds are canceled, their idle workspaces
//! deleted ([`DeleteReason::InactiveVersion`]), builds already running are
//! left to finish.
//!
//! When paused, the statuses are computed (with `paused` set) and there are
//! no actions at all. The output is deterministic: see [`Decision`].
//!
//! Tested as a table of snapshots (`tests/decide.rs`); `benches/decide.rs`
//! times one decision over 1,000 presets and 10,000 workspaces.

mod decision;
mod desired;
mod failures;
mod reconcile;
mod snapshot;

use std::time::Duration;

pub use decision::{Action, Decision, DeleteReason, PresetStatus};
pub use reconcile::decide;
pub use snapshot::{FailureHistory, PrebuildState, PrebuiltWorkspace, PresetSnapshot, Snapshot};

/// The operator's settings of the reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// `--prebuilds-backoff`: the wait after one failure, multiplied by the
    /// consecutive failures.
    pub backoff: Duration,
    /// `--prebuilds-failure-hard-limit`: consecutive failures after which a
    /// preset creates nothing more; 0 disables the limit.
    pub failure_hard_limit: u32,
}
