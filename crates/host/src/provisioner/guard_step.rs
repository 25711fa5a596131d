//! The guard step of a build: `terraform show -json` of the saved plan (where
//! Terraform ran), the guard's decision with the template's annotations and
//! the workspace's remembered protections (on the server), and how the
//! decision is told.

use abode_guard::{Decision, Report};
use abode_store::{PrebuildPart, Transition};

use abode_runner::Failure;

use super::run::internal;

/// A saved plan as the guard judged it.
pub(super) struct Judged {
    pub(super) report: Report,
}

/// The guard on a plan's JSON with the template's annotations and the
/// workspace's remembered protections: the same judgement for a build,
/// wherever it ran, and for a preview.
pub(super) async fn judge_plan(
    host: &crate::room::Host,
    plan_json: &[u8],
    workspace_id: &str,
    transition: abode_guard::BuildIntent,
    initiator: abode_guard::Initiator,
    retain: &[abode_guard::Address],
    extra_rules: Vec<abode_guard::Rule>,
) -> Result<Judged, Failure> {
    let plan = abode_guard::read_plan_slice(plan_json)
        .map_err(|error| Failure::failed(format!("cannot read the plan: {error}")))?;
    let memory = host
        .held()
        .remembered(workspace_id)
        .await
        .map_err(internal)?;
    let mut rules = abode_guard::remembered_rules(&memory);
    rules.extend(extra_rules);
    let report = if transition == abode_guard::BuildIntent::Delete && !retain.is_empty() {
        abode_guard::evaluate_delete(&plan, initiator, &rules, retain)
    } else {
        abode_guard::evaluate_as(&plan, transition, initiator, &rules)
    };
    Ok(Judged { report })
}

/// The guard's transition of a build: a claim build is a `start` to the
/// store and a `claim` to the guard (a prebuilt workspace has never held
/// anyone's data, so what it replaces is allowed, and reported).
pub(super) fn guard_transition(
    transition: Transition,
    prebuild: Option<PrebuildPart>,
) -> abode_guard::BuildIntent {
    abode_guard::BuildIntent::of_build(transition, prebuild == Some(PrebuildPart::Claim))
}

/// The protected changes that made the decision, in one line:
/// `abode_volume.home: replaced because ...; ...`.
pub(super) fn describe_changes(report: &Report, decision: Decision) -> String {
    let described: Vec<String> = report
        .protected_changes
        .iter()
        .filter(|change| change.outcome == decision)
        .map(|change| format!("{}: {}", change.address, change.reason))
        .collect();
    if described.is_empty() {
        "protected resources would be destroyed or replaced".to_string()
    } else {
        described.join("; ")
    }
}
