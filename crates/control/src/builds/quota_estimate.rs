//! A create's estimate judged at the door: with quotas enforced, a create
//! whose cost is already known and clearly does not fit is refused before
//! any Terraform runs (`create_estimate.rs` says how estimates are made).

use abode_runner::{LogLevel, LogStage};
use abode_store::{Build, TemplateVersion, User};

use super::{Builds, Creation};
use crate::audit::system_event;
use crate::quota_text::{budget_lines, refusal_line, EstimateSource};
use crate::ControlError;

impl Builds {
    /// With quotas enforced, a person's create whose estimate is known
    /// without running Terraform (it was estimated before, as `abode create`
    /// does first) and clearly does not fit is refused before any Terraform
    /// runs: its first build ends `refused` by quota with the breakdown in
    /// its log, exactly as a refusal at its plan would, and the workspace
    /// stays (a later start, with room, builds it). One that fits says its
    /// estimate in the log. The build's own plan is judged all the same.
    pub(crate) async fn judge_create_estimate(
        &self,
        owner: &User,
        version: &TemplateVersion,
        creation: &Creation,
        build: &Build,
    ) -> Result<(), ControlError> {
        let Some(known) = self
            .templates()
            .known_import_cost(version, &creation.values)
        else {
            return Ok(());
        };
        let Ok(cost) = known else {
            return Ok(());
        };
        let total = i64::try_from(cost.total).unwrap_or(i64::MAX);
        let usage = self.inner.store.quota_usage(&owner.id).await?;
        let estimate = format!(
            "estimated daily cost: {}, {}; {} uses {} of a budget of {}",
            cost.describe(),
            EstimateSource::ImportPlan.describe(),
            owner.username,
            usage.spent(),
            usage.budget()
        );
        if usage.spent().saturating_add(total) <= usage.budget() {
            self.build_log()
                .note(&build.id, &LogStage::QUOTA, LogLevel::Info, &estimate)
                .await;
            return Ok(());
        }
        self.build_log()
            .note(&build.id, &LogStage::QUOTA, LogLevel::Warn, &estimate)
            .await;
        for line in budget_lines(&usage) {
            self.build_log()
                .note(&build.id, &LogStage::QUOTA, LogLevel::Warn, &line)
                .await;
        }
        let message = refusal_line(&build.workspace_name, &owner.username, total, &usage);
        // A worker that claimed the build first plans it: its own plan is
        // judged then, and the lines above stay as what the estimate said.
        if self
            .inner
            .store
            .refuse_pending_build(&build.id, &message, total)
            .await?
        {
            self.build_log()
                .note(&build.id, &LogStage::QUOTA, LogLevel::Error, &message)
                .await;
            // The build's refusal is `quota`, whichever plan told it.
            self.inner.metrics.quota_refusal("quota");
            let (actor, event) = system_event("build.refused", build, Some(message));
            self.inner.audit.record_as(&actor, event).await;
        }
        Ok(())
    }
}
