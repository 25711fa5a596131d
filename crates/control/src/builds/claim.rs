//! A person claims a prebuilt workspace: the door's way to create a
//! workspace from a preset when its pool has a ready one.
//!
//! One store transaction picks a ready prebuild of the template's active
//! version and the preset (one claimant per prebuild, across servers),
//! gives it to the claimant under the name they asked for and queues a
//! `start` build with reason `prebuild_claim`. That build runs with
//! `ABODE_IS_PREBUILD_CLAIM=true` and goes through the guard as a claim:
//! what it replaces is allowed, recorded and reported (`provisioner/`).
//!
//! With `--quota-enforce` the claim is checked against the claimant's budget
//! before anything moves, in that same transaction: a prebuild whose cost
//! (its newest costed build) would take the claimant past their budget is
//! not handed over and stays in its pool, owned by `prebuilds`. The door
//! then builds the workspace from scratch, whose own plan the quota step
//! judges, so the claimant gets exactly a create's refusal.

use abode_contract::presets::PresetDefinition;
use abode_store::{PrebuildClaim, PrebuildClaimed, StoreError, SystemActor, TemplateVersion, User};

use super::Builds;
use crate::Actor;

impl Builds {
    /// Hands a ready, unexpired prebuild of `version` (the active one) and
    /// `preset` to `owner` as `name`, with its claim build queued, unless
    /// none is ready or (quotas enforced) it would not fit `owner`'s budget.
    pub(crate) async fn claim_prebuild(
        &self,
        actor: &Actor,
        owner: &User,
        name: &str,
        version: &TemplateVersion,
        preset: &PresetDefinition,
    ) -> Result<PrebuildClaimed, StoreError> {
        let now = self.inner.clock.now_ms();
        let heartbeat = self.inner.agent_heartbeat;
        let heartbeat_ms = i64::try_from(heartbeat.as_millis()).unwrap_or(i64::MAX);
        let claim = PrebuildClaim {
            pool_owner_id: SystemActor::Prebuilds.user_id().to_string(),
            version_id: version.id.clone(),
            preset_name: preset.name.clone(),
            claimant_id: owner.id.clone(),
            name: name.to_string(),
            initiator_id: actor.id().to_string(),
            heartbeat_before: now.saturating_sub(heartbeat_ms),
            created_after: match preset.prebuilds.as_ref().map(|pool| pool.ttl_seconds) {
                Some(ttl) if ttl > 0 => now.saturating_sub(ttl.saturating_mul(1000)),
                _ => i64::MIN,
            },
            build_id: abode_store::new_id(),
            enforce_quota: self.inner.quota_enforce,
        };
        self.inner.store.claim_prebuild(&claim).await
    }
}
