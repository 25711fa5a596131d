//! How quota speaks, the same whichever path told it: where an estimate's
//! cost comes from, the lines that show how a budget adds up, and a
//! refusal's one line. A create refused by its estimate at the door
//! (`builds/quota_estimate.rs`) reads exactly as one refused by its plan
//! (`provisioner/quota_step.rs`).

use abode_store::QuotaUsage;

/// Where an estimate's cost comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EstimateSource {
    /// The version's import plan with the create's values.
    ImportPlan,
    /// The last costed prebuild plan of the preset's pool (a create of
    /// exactly the preset's values may claim one).
    PrebuildPool { preset: String },
}

impl EstimateSource {
    /// The wire's name (`docs/api.md`).
    pub fn as_str(&self) -> &'static str {
        match self {
            EstimateSource::ImportPlan => "import_plan",
            EstimateSource::PrebuildPool { .. } => "prebuild_pool",
        }
    }

    /// How a person reads it, in a sentence's parentheses.
    pub fn describe(&self) -> String {
        match self {
            EstimateSource::ImportPlan => {
                "from the template's import plan with these values".into()
            }
            EstimateSource::PrebuildPool { preset } => {
                format!("the last prebuild plan of preset \"{preset}\"")
            }
        }
    }
}

/// The lines that show how a budget adds up, for a refused build's log:
/// each counted workspace, then each group's allowance.
pub fn budget_lines(usage: &QuotaUsage) -> Vec<String> {
    let workspaces = usage.workspaces.iter().map(|workspace| {
        format!(
            "  workspace {} (build #{}{}): {} a day",
            workspace.workspace_name,
            workspace.build_number,
            if workspace.reserved { ", reserved" } else { "" },
            workspace.daily_cost
        )
    });
    let groups = usage
        .allowances
        .iter()
        .map(|group| format!("  group {}: allows {} a day", group.group, group.allowance));
    workspaces.chain(groups).collect()
}

/// The refusal's one line, the same whether the plan or its estimate told.
pub fn refusal_line(workspace: &str, owner: &str, cost: i64, usage: &QuotaUsage) -> String {
    let (spent, budget) = (usage.spent(), usage.budget());
    format!(
        "refused by quota: {workspace} would cost {cost} a day; {owner} already uses {spent} of \
         a budget of {budget} ({} remain); nothing was applied",
        budget.saturating_sub(spent).max(0)
    )
}
