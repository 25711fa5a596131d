//! What follows the end of a pool's build or a claim build: the counts, a
//! preset that recovers from its failures, and the report of what a claim
//! replaced.

use abode_store::{Build, BuildStatus, PrebuildPart, Transition};

use super::Prebuilds;
use crate::notifications::{preset_recovered, ReplacedResource};

/// What a claim build's guard report says it replaced or deleted.
pub fn claim_replacements(build: &Build) -> Vec<ReplacedResource> {
    build
        .guard_report
        .iter()
        .flat_map(|report| &report.claim_replacements)
        .map(|replaced| ReplacedResource {
            address: replaced.address.clone(),
            paths: replaced.replace_paths.clone(),
        })
        .collect()
}

impl Prebuilds {
    /// After a build of a prebuilt workspace or a claim build (`part`, as
    /// its job carried it) ended `status` (read again: the end and the
    /// guard report are stored).
    pub async fn build_ended(&self, build_id: &str, part: PrebuildPart, status: BuildStatus) {
        let build = match self.inner.store.build_by_id(build_id).await {
            Ok(build) => build,
            Err(error) => {
                tracing::error!(build = %build_id, %error, "cannot read a finished build");
                return;
            }
        };
        let first_start = part == PrebuildPart::Pool
            && build.transition == Transition::Start
            && build.number == 1;
        let claim = part == PrebuildPart::Claim;
        if !(first_start || claim) || !status.is_final() {
            return;
        }
        let workspace = match self.inner.store.workspace_by_id(&build.workspace_id).await {
            Ok(workspace) => workspace,
            Err(error) => {
                tracing::error!(build = %build_id, %error, "cannot read a prebuilt workspace");
                return;
            }
        };
        let preset = workspace.preset_name.clone().unwrap_or_default();
        let metrics = &self.inner.metrics;
        if first_start {
            if build.refusal.is_some() {
                // Refused by the prebuilds budget before apply: no failure
                // of the template (the pool's budget episode tells it).
                return;
            }
            let succeeded = status == BuildStatus::Succeeded;
            metrics.prebuild_ended(&workspace.template_name, &preset, succeeded);
            if succeeded {
                self.pool_recovered(&workspace.template_name, &preset).await;
            }
            return;
        }
        if status != BuildStatus::Succeeded {
            return;
        }
        let replaced = claim_replacements(&build);
        let seconds = (self.inner.clock.now_ms() - build.created_at).max(0) as f64 / 1000.0;
        metrics.prebuild_claimed(
            &workspace.template_name,
            &preset,
            seconds,
            u64::try_from(replaced.len()).unwrap_or(u64::MAX),
        );
        if replaced.is_empty() {
            return;
        }
        let claimant = match self.inner.store.user_by_id(&workspace.owner_id).await {
            Ok(user) => user,
            Err(error) => {
                tracing::error!(%error, "cannot read the claimant of a prebuilt workspace");
                return;
            }
        };
        if let Err(error) = self
            .notifications()
            .notify_prebuild_resource_replaced(&workspace, &claimant, &replaced)
            .await
        {
            tracing::error!(%error, "cannot write the prebuild_resource_replaced notification");
        }
    }

    /// A pool's build succeeded: its next hard limit is told again.
    async fn pool_recovered(&self, template_name: &str, preset: &str) {
        let recovered = match self.inner.store.template_by_name(template_name).await {
            Ok(template) => preset_recovered(&self.inner.store, &template, preset).await,
            Err(error) => Err(error.into()),
        };
        if let Err(error) = recovered {
            tracing::error!(%error, "cannot clear a preset's hard-limit notice");
        }
    }
}
