//! A create's estimated daily cost, before it is queued (`abode create`
//! shows it first, the dashboard's create page on request): the same values
//! a create would build (its preset, the given values, the defaults), the
//! same template version, and their cost from the version's import plan
//! with those values; for a preset whose pool has a costed prebuild, the
//! pool's last cost, which a claim would move to the person. Beside it, the
//! person's budget as `abode quota show` adds it up, and whether it fits.
//!
//! The estimate is advice: the build's own plan is still costed and judged
//! in the reservation's transaction (`provisioner/quota_step.rs`).

use std::collections::BTreeMap;

use abode_store::{BuildReason, SystemActor};
use serde_json::Value;

use super::{resolve_creation, Builds, VersionChoice};
use crate::authz::Action;
use crate::{Actor, Caller, ControlError};

pub use crate::quota_text::EstimateSource;

/// What a create would cost, and how it sits in the person's budget.
#[derive(Debug, Clone)]
pub struct CreateEstimate {
    pub template: String,
    pub version: i64,
    /// The preset the create would have (named, or matched by its values).
    pub preset: Option<String>,
    pub source: EstimateSource,
    /// The total, when it could be told.
    pub daily_cost: Option<i64>,
    /// Each charged metadata (an import plan's; a pool's cost has none).
    pub items: Vec<abode_cost::Item>,
    /// Why the cost could not be told.
    pub unknown: Option<String>,
    /// Whether the server refuses builds over budget (`--quota-enforce`).
    pub enforced: bool,
    pub budget: i64,
    pub spent: i64,
}

impl CreateEstimate {
    /// `budget - spent` (negative when over, as `abode quota show` says).
    pub fn remaining(&self) -> i64 {
        self.budget.saturating_sub(self.spent)
    }

    /// Whether the create fits the budget; `None` when quotas are not
    /// enforced or the cost is unknown.
    pub fn fits(&self) -> Option<bool> {
        let cost = self.daily_cost.filter(|_| self.enforced)?;
        Some(self.spent.saturating_add(cost) <= self.budget)
    }

    /// One line: `5 a day (from ...); dev uses 4 of a budget of 10`.
    pub fn describe(&self, owner: &str) -> String {
        let cost = match (&self.daily_cost, &self.unknown) {
            (Some(total), _) if !self.items.is_empty() => abode_cost::Cost {
                total: u64::try_from(*total).unwrap_or(0),
                items: self.items.clone(),
            }
            .describe(),
            (Some(total), _) => format!("{total} a day"),
            (None, Some(why)) => format!("unknown ({why})"),
            (None, None) => "unknown".into(),
        };
        format!(
            "estimated daily cost: {cost}, {}; {owner} uses {} of a budget of {}",
            self.source.describe(),
            self.spent,
            self.budget
        )
    }
}

impl Builds {
    /// The estimate of `caller`'s create of a workspace from `template_name`
    /// with `preset` and `parameters`, checked as the create would be (the
    /// right to create, the template's access list, every value); nothing
    /// is recorded.
    pub async fn estimate_create(
        &self,
        caller: &Caller,
        template_name: &str,
        preset: Option<&str>,
        parameters: &BTreeMap<String, Value>,
    ) -> Result<CreateEstimate, ControlError> {
        caller.authorize(Action::WorkspaceCreate, Some(&caller.user.id))?;
        let template = self.templates().template(template_name).await?;
        let actor = Actor::User(caller.user.clone());
        let roles = self.identity().roles_of(&caller.user.id).await?;
        self.templates()
            .may_build_from(&actor, &roles, &template, true)
            .await?;
        let version = self
            .chosen_version(&template, None, VersionChoice::Active)
            .await?;
        let creation = resolve_creation(&version, preset, parameters)?;
        let pool = self.create_pool(&template, &version, &creation, BuildReason::Initiator);
        let pool_cost = match &pool {
            Some(pool) => self
                .inner
                .store
                .prebuild_pool_cost(SystemActor::Prebuilds.user_id(), &version.id, &pool.name)
                .await?
                .map(|cost| (cost, pool.name.clone())),
            None => None,
        };
        let (source, cost) = match pool_cost {
            Some((cost, preset)) => (
                EstimateSource::PrebuildPool { preset },
                Ok(abode_cost::Cost {
                    total: u64::try_from(cost).unwrap_or(0),
                    items: Vec::new(),
                }),
            ),
            None => (
                EstimateSource::ImportPlan,
                self.templates()
                    .import_cost(&version, &creation.values)
                    .await?,
            ),
        };
        let usage = self.inner.store.quota_usage(&caller.user.id).await?;
        let (daily_cost, items, unknown) = match cost {
            Ok(cost) => (
                Some(i64::try_from(cost.total).unwrap_or(i64::MAX)),
                cost.items,
                None,
            ),
            Err(why) => (None, Vec::new(), Some(why)),
        };
        Ok(CreateEstimate {
            template: template.name.clone(),
            version: version.number,
            preset: creation.preset.map(|preset| preset.name),
            source,
            daily_cost,
            items,
            unknown,
            enforced: self.inner.quota_enforce,
            budget: usage.budget(),
            spent: usage.spent(),
        })
    }
}
