//! The decision: which changes in a plan touch protected resources, and whether
//! the build may go on, must wait for a confirmation, or must stop.

use crate::address::Address;
use crate::annotation;
use crate::format::{OlderPlanFormat, PlanFormat};
use crate::plan::{AttributeChange, Drift, Plan, ResourceChange, ResourceMode};
use crate::rules::{self, Mode, Rule};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The version of the JSON report; bumped only on purpose (see docs/plan-check.md).
pub const REPORT_SCHEMA_VERSION: u32 = 1;

/// Why the build runs, as the guard judges it: the contract's transition
/// ([`abode_contract::Transition`], which converts into it), or a claim.
/// Only `delete` (a person's: see [`Initiator`]) and `claim` may destroy
/// protected resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildIntent {
    Start,
    Stop,
    Delete,
    /// The first build of a prebuilt workspace for the user who claimed it. The
    /// workspace has never held anyone's data, so nothing it loses is anyone's:
    /// every destroy is allowed and listed in [`Report::claim_replacements`].
    Claim,
}

impl BuildIntent {
    pub fn parse(s: &str) -> Option<BuildIntent> {
        match s {
            "start" => Some(BuildIntent::Start),
            "stop" => Some(BuildIntent::Stop),
            "delete" => Some(BuildIntent::Delete),
            "claim" => Some(BuildIntent::Claim),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BuildIntent::Start => "start",
            BuildIntent::Stop => "stop",
            BuildIntent::Delete => "delete",
            BuildIntent::Claim => "claim",
        }
    }
}

impl BuildIntent {
    /// How a build of `transition` is judged; `claim`: the build hands a
    /// prebuilt workspace to the person who claimed it (a `start` to the
    /// store and the environment contract, a `claim` here).
    pub fn of_build(transition: abode_contract::Transition, claim: bool) -> BuildIntent {
        match transition {
            abode_contract::Transition::Start if claim => BuildIntent::Claim,
            other => other.into(),
        }
    }
}

impl From<abode_contract::Transition> for BuildIntent {
    fn from(transition: abode_contract::Transition) -> BuildIntent {
        match transition {
            abode_contract::Transition::Start => BuildIntent::Start,
            abode_contract::Transition::Stop => BuildIntent::Stop,
            abode_contract::Transition::Delete => BuildIntent::Delete,
        }
    }
}

impl fmt::Display for BuildIntent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who asked for the build: a person, or the system on its own (the lifecycle
/// scheduler's autostart, autostop and dormant deletion).
///
/// It matters only for `delete`: a person's delete is the intent to destroy the
/// workspace with its data, but a delete nobody asked for is not, so protected
/// resources are judged as in a `start` (their rules' mode decides) and none is
/// destroyed without a person. Every other transition is judged alike whoever asks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Initiator {
    #[default]
    Person,
    System,
}

impl Initiator {
    pub fn parse(s: &str) -> Option<Initiator> {
        match s {
            "person" => Some(Initiator::Person),
            "system" => Some(Initiator::System),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Initiator::Person => "person",
            Initiator::System => "system",
        }
    }

    /// Whether a person asked (the JSON report leaves `initiator` out then).
    pub fn is_person(&self) -> bool {
        *self == Initiator::Person
    }
}

impl fmt::Display for Initiator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the guard says about a plan. Ordered: the strictest outcome wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Confirm,
    Block,
}

impl From<Mode> for Decision {
    fn from(mode: Mode) -> Decision {
        match mode {
            Mode::Confirm => Decision::Confirm,
            Mode::Block => Decision::Block,
        }
    }
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Confirm => "confirm",
            Decision::Block => "block",
        }
    }

    /// The decision a report names (`decision` in the JSON report).
    pub fn parse(text: &str) -> Option<Decision> {
        [Decision::Allow, Decision::Confirm, Decision::Block]
            .into_iter()
            .find(|decision| decision.as_str() == text)
    }
}

/// What Terraform will do to one resource instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Create,
    Read,
    Update,
    /// Destroy, then create (`["delete","create"]`).
    Replace,
    /// Create the new object first (`["create","delete"]`, create_before_destroy).
    ReplaceCreateBeforeDestroy,
    Delete,
    /// Removed from state without being destroyed (`removed { destroy = false }`).
    Forget,
    NoOp,
    /// An action list this version of Abode does not know.
    Unknown,
}

impl Action {
    pub fn classify(actions: &[String]) -> Action {
        let actions: Vec<&str> = actions.iter().map(String::as_str).collect();
        match actions.as_slice() {
            ["no-op"] => Action::NoOp,
            ["create"] => Action::Create,
            ["read"] => Action::Read,
            ["update"] => Action::Update,
            ["delete"] => Action::Delete,
            ["delete", "create"] => Action::Replace,
            ["create", "delete"] => Action::ReplaceCreateBeforeDestroy,
            ["forget"] => Action::Forget,
            _ => Action::Unknown,
        }
    }

    /// Whether the existing object (and its data) is destroyed.
    pub fn destroys(self, raw: &[String]) -> bool {
        match self {
            Action::Delete | Action::Replace | Action::ReplaceCreateBeforeDestroy => true,
            // Unknown action lists are judged by whether they destroy at all.
            Action::Unknown => raw.iter().any(|a| a == "delete"),
            _ => false,
        }
    }
}

/// Counts of every change in the plan, protected or not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    pub create: usize,
    pub update: usize,
    pub replace: usize,
    pub delete: usize,
    pub forget: usize,
    pub read: usize,
    pub no_op: usize,
}

/// Why a protected resource is in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protection {
    /// Who protects it, e.g. `abode_protect.home on abode_volume.home`.
    pub by: String,
    pub mode: Mode,
}

/// A change outside Terraform that Terraform noticed while planning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftReport {
    /// The object was deleted outside Terraform.
    pub deleted: bool,
    #[serde(default)]
    pub attributes: Vec<AttributeChange>,
}

/// One protected resource that the plan destroys, replaces or re-creates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectedChange {
    pub address: String,
    pub previous_address: Option<String>,
    pub resource_type: String,
    pub action: Action,
    /// Terraform's raw action list, e.g. `["delete","create"]`.
    #[serde(default)]
    pub actions: Vec<String>,
    /// Set when the change is to a deposed object of the resource.
    pub deposed: Option<String>,
    /// Terraform's `action_reason`, as Terraform writes it.
    pub action_reason: Option<String>,
    /// The reason in plain words.
    pub reason: String,
    #[serde(default)]
    pub replace_paths: Vec<AttributeChange>,
    pub drift: Option<DriftReport>,
    #[serde(default)]
    pub protected_by: Vec<Protection>,
    pub outcome: Decision,
}

/// A destructive change to a resource nobody protected, listed for context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnprotectedChange {
    pub address: String,
    pub action: Action,
    pub reason: String,
}

/// A resource of a prebuilt workspace that its claim build destroys: allowed,
/// because the workspace never held anyone's data, and recorded so that template
/// admins learn that their template does not survive a claim unchanged (a volume
/// named after its owner is replaced on every claim, which defeats the prebuild).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimReplacement {
    pub address: String,
    /// `replace`, `replace_create_before_destroy` or `delete`; `create` for a
    /// resource deleted outside Terraform that the claim creates again.
    pub action: Action,
    /// The attributes that force the replacement (Terraform's `replace_paths`,
    /// rendered like [`AttributeChange::path`], e.g. `name`, `labels.owner`,
    /// `labels["team name"]`, a sensitive key as `tags[(sensitive value)]`);
    /// empty when Terraform does not say (deletes, `replace_triggered_by`, `-replace`).
    #[serde(default)]
    pub replace_paths: Vec<String>,
    /// Why Terraform destroys it, in plain words (as [`ProtectedChange::reason`]).
    pub reason: String,
    /// Whether a rule or an `abode_protect` annotation protects it: outside a
    /// claim the same change would need a confirmation or be blocked.
    pub protected: bool,
}

/// The guard's answer for one plan. Deserialisable so that a stored report
/// is read back as this type: the fields a report may leave out (those added
/// within schema 1, and those absent when empty) read as their defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub decision: Decision,
    pub transition: BuildIntent,
    /// Who asked for the build. Absent from the JSON when a person did, so
    /// reports of builds people start read as before.
    #[serde(default, skip_serializing_if = "Initiator::is_person")]
    pub initiator: Initiator,
    pub terraform_version: Option<String>,
    /// Set only for plans older than format 1.x: the explanations their format
    /// cannot give. Absent from the JSON otherwise, so reports on current plans
    /// read as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub older_plan_format: Option<OlderPlanFormat>,
    #[serde(default)]
    pub summary: Summary,
    #[serde(default)]
    pub protected_changes: Vec<ProtectedChange>,
    #[serde(default)]
    pub unprotected_destroys: Vec<UnprotectedChange>,
    /// Only in a `claim` build, which lists every destroy here instead of in
    /// `protected_changes` and `unprotected_destroys`. Absent from the JSON when
    /// empty, so reports of other builds read as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claim_replacements: Vec<ClaimReplacement>,
    /// Only in a `delete` that retains: the resources it forgets instead of
    /// destroying (the platform keeps a record of each). Absent from the
    /// JSON when empty, so other reports read as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retained: Vec<RetainedResource>,
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// A resource instance a delete forgets and the platform keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetainedResource {
    pub address: String,
    pub resource_type: String,
    /// Set when the forgotten object is a deposed object of the instance
    /// (the old object a failed create_before_destroy replacement left):
    /// Terraform forgets those of a `removed` resource too, and the object
    /// exists as much as the current one does. Absent from the JSON otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deposed: Option<String>,
}

impl Report {
    /// The report as pretty JSON (the documented `abode plan check --format json` schema).
    pub fn to_json(&self) -> String {
        // Serialising plain structs of strings and numbers cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// Decides on a plan of a build a person asked for. `rules` are the caller's;
/// the template's `abode_protect` annotations are read from the plan and added
/// to them.
pub fn evaluate(plan: &Plan, transition: BuildIntent, rules: &[Rule]) -> Report {
    evaluate_as(plan, transition, Initiator::Person, rules)
}

/// Decides on a plan of a build that `initiator` asked for: as [`evaluate`],
/// except that a `delete` the system started does not destroy protected
/// resources unless a person confirms (or, under a `block` rule, deletes the
/// workspace themselves).
pub fn evaluate_as(
    plan: &Plan,
    transition: BuildIntent,
    initiator: Initiator,
    rules: &[Rule],
) -> Report {
    judge(plan, transition, initiator, rules, &[])
}

/// Decides on the plan of a workspace delete that retains the resources
/// of `retain` (whole resources: every instance of each, as Terraform's
/// `removed` blocks forget them). Each must be forgotten: a plan that would
/// destroy one instead is blocked, whoever asked and whatever the rules
/// say, because the person who asked for the delete asked to keep it. The
/// rest is judged as [`evaluate_as`] judges a delete.
pub fn evaluate_delete(
    plan: &Plan,
    initiator: Initiator,
    rules: &[Rule],
    retain: &[Address],
) -> Report {
    let retain: Vec<Address> = retain.iter().map(Address::resource).collect();
    judge(plan, BuildIntent::Delete, initiator, rules, &retain)
}

fn judge(
    plan: &Plan,
    transition: BuildIntent,
    initiator: Initiator,
    rules: &[Rule],
    retain: &[Address],
) -> Report {
    let annotations = rules::annotations(plan);
    let mut all_rules: Vec<Rule> = rules.to_vec();
    all_rules.extend(annotations.rules);
    let id_rules = annotations.by_id;
    let mut warnings = annotations.warnings;
    if plan.errored {
        warnings.push("Terraform marked this plan as errored: it may be incomplete".into());
    }

    let mut summary = Summary::default();
    let mut protected_changes = Vec::new();
    let mut unprotected_destroys = Vec::new();
    let mut claim_replacements = Vec::new();
    let mut retained = Vec::new();

    for change in &plan.changes {
        let action = Action::classify(&change.actions);
        count(&mut summary, action, &change.actions);
        if change.mode == ResourceMode::Data
            || annotation::is_annotation_type(&change.resource_type)
        {
            continue;
        }
        let destroys = action.destroys(&change.actions) || is_deposed_delete(change);
        let kept = Address::parse(&change.address)
            .ok()
            .is_some_and(|address| retain.contains(&address.resource()));
        // Deposed objects too: Terraform forgets every object of a resource
        // a `removed { destroy = false }` names, and one the report left out
        // would be left running with no record of it anywhere.
        if kept && action == Action::Forget {
            retained.push(RetainedResource {
                address: change.address.clone(),
                resource_type: change.resource_type.clone(),
                deposed: change.deposed.clone(),
            });
            continue;
        }
        if kept && destroys {
            protected_changes.push(ProtectedChange {
                address: change.address.clone(),
                previous_address: change.previous_address.clone(),
                resource_type: change.resource_type.clone(),
                action,
                actions: change.actions.clone(),
                deposed: change.deposed.clone(),
                action_reason: change.action_reason.clone(),
                reason: format!(
                    "{}, but this delete retains it: the plan must forget it",
                    reason(change, action, transition, None, plan.format)
                ),
                replace_paths: change.replace_paths.clone(),
                drift: None,
                protected_by: vec![Protection {
                    by: format!("the delete's retention of {}", change.address),
                    mode: Mode::Block,
                }],
                outcome: Decision::Block,
            });
            continue;
        }
        let drift = find_drift(plan, change);
        let recreated_after_drift = action == Action::Create && drift.is_some_and(|d| d.deleted);
        if !destroys && !recreated_after_drift {
            continue;
        }
        let mut protections = protections_for(change, &all_rules, &mut warnings);
        for rule in &id_rules {
            if change
                .before_id
                .as_ref()
                .is_some_and(|id| rule.ids.contains(id))
            {
                protections.push(Protection {
                    by: format!(
                        "{} on {} (its id is the annotation's resource_id)",
                        rule.annotation, change.address
                    ),
                    mode: rule.mode,
                });
            }
        }
        if transition == BuildIntent::Claim {
            claim_replacements.push(ClaimReplacement {
                address: change.address.clone(),
                action,
                replace_paths: change
                    .replace_paths
                    .iter()
                    .map(|p| p.path.clone())
                    .collect(),
                reason: reason(change, action, transition, drift, plan.format),
                protected: !protections.is_empty(),
            });
            continue;
        }
        if protections.is_empty() {
            if destroys {
                unprotected_destroys.push(UnprotectedChange {
                    address: change.address.clone(),
                    action,
                    reason: reason(change, action, transition, drift, plan.format),
                });
            }
            continue;
        }
        let outcome = match transition {
            // Only a person's delete means to destroy the workspace's data.
            BuildIntent::Delete if initiator == Initiator::Person => Decision::Allow,
            // The data is already gone; a confirmation acknowledges that the
            // new object will be empty. Blocking would leave no way forward.
            _ if recreated_after_drift => Decision::Confirm,
            _ => protections
                .iter()
                .map(|p| Decision::from(p.mode))
                .max()
                .unwrap_or(Decision::Confirm),
        };
        protected_changes.push(ProtectedChange {
            address: change.address.clone(),
            previous_address: change.previous_address.clone(),
            resource_type: change.resource_type.clone(),
            action,
            actions: change.actions.clone(),
            deposed: change.deposed.clone(),
            action_reason: change.action_reason.clone(),
            reason: reason(change, action, transition, drift, plan.format),
            replace_paths: change.replace_paths.clone(),
            drift: drift.map(|d| DriftReport {
                deleted: d.deleted,
                attributes: d.attributes.clone(),
            }),
            protected_by: protections,
            outcome,
        });
    }

    let decision = protected_changes
        .iter()
        .map(|c| c.outcome)
        .max()
        .unwrap_or(Decision::Allow);
    Report {
        schema_version: REPORT_SCHEMA_VERSION,
        decision,
        transition,
        initiator,
        terraform_version: plan.terraform_version.clone(),
        older_plan_format: older_plan_format(plan),
        summary,
        protected_changes,
        unprotected_destroys,
        claim_replacements,
        retained,
        warnings,
    }
}

fn older_plan_format(plan: &Plan) -> Option<OlderPlanFormat> {
    let missing = plan.format.missing();
    if missing.is_empty() {
        return None;
    }
    Some(OlderPlanFormat {
        format_version: plan.format_version.clone(),
        written_by: plan.format.written_by().to_string(),
        missing,
    })
}

fn count(summary: &mut Summary, action: Action, raw: &[String]) {
    match action {
        Action::Create => summary.create += 1,
        Action::Read => summary.read += 1,
        Action::Update => summary.update += 1,
        Action::Replace | Action::ReplaceCreateBeforeDestroy => summary.replace += 1,
        Action::Delete => summary.delete += 1,
        Action::Forget => summary.forget += 1,
        Action::NoOp => summary.no_op += 1,
        Action::Unknown if raw.iter().any(|a| a == "delete") => summary.delete += 1,
        Action::Unknown => summary.update += 1,
    }
}

fn is_deposed_delete(change: &ResourceChange) -> bool {
    change.deposed.is_some() && change.actions.iter().any(|a| a == "delete")
}

fn find_drift<'p>(plan: &'p Plan, change: &ResourceChange) -> Option<&'p Drift> {
    plan.drift.iter().find(|d| {
        d.address == change.address || Some(&d.address) == change.previous_address.as_ref()
    })
}

fn protections_for(
    change: &ResourceChange,
    rules: &[Rule],
    warnings: &mut Vec<String>,
) -> Vec<Protection> {
    let mut addresses = Vec::new();
    for text in std::iter::once(&change.address).chain(change.previous_address.as_ref()) {
        match Address::parse(text) {
            Ok(address) => addresses.push(address),
            Err(e) => warnings.push(format!("{e}; only type rules can match it")),
        }
    }
    let mut protections: Vec<Protection> = Vec::new();
    for rule in rules {
        let covered = if addresses.is_empty() {
            rule.covers(None, &change.resource_type)
        } else {
            addresses
                .iter()
                .any(|a| rule.covers(Some(a), &change.resource_type))
        };
        if covered {
            let protection = Protection {
                by: rule.describe(),
                mode: rule.mode,
            };
            if !protections.contains(&protection) {
                protections.push(protection);
            }
        }
    }
    protections
}

fn reason(
    change: &ResourceChange,
    action: Action,
    transition: BuildIntent,
    drift: Option<&Drift>,
    format: PlanFormat,
) -> String {
    if action == Action::Create {
        return "created again because it was deleted outside Terraform: the new one will be empty"
            .into();
    }
    let verb = match action {
        Action::Replace | Action::ReplaceCreateBeforeDestroy => "replaced",
        _ => "deleted",
    };
    if let Some(deposed) = &change.deposed {
        return format!(
            "deposed object {deposed} (the old object left by an earlier replacement) is deleted"
        );
    }
    let paths: Vec<String> = change
        .replace_paths
        .iter()
        .map(|p| format!("`{}`", p.path))
        .collect();
    let key = instance_key(&change.address);
    let text = match change.action_reason.as_deref() {
        Some("replace_because_cannot_update") if !paths.is_empty() => format!(
            "replaced because {} cannot be updated in place",
            join_words(&paths)
        ),
        Some("replace_because_cannot_update") => {
            "replaced because a changed attribute cannot be updated in place".into()
        }
        Some("replace_because_tainted") => {
            "replaced because it is tainted (an earlier apply failed or it was marked for replacement)"
                .into()
        }
        Some("replace_by_request") => {
            "replaced because the plan was asked to replace it (-replace)".into()
        }
        Some("replace_by_triggers") => {
            "replaced because a resource in its replace_triggered_by changed".into()
        }
        // A delete that retains plans without the template's resources.
        Some("delete_because_no_resource_config" | "delete_because_no_module")
            if transition == BuildIntent::Delete =>
        {
            "deleted because the workspace is being deleted".into()
        }
        Some("delete_because_no_resource_config") => {
            "deleted because the resource block was removed from the template".into()
        }
        Some("delete_because_no_module") => {
            // Terraform uses this when a module instance goes away (its module's
            // count or for_each changed, e.g. count = start_count on a stop); a
            // removed module call is reported as delete_because_no_resource_config.
            "deleted because the module instance it belongs to no longer exists (the module's count or for_each changed)".into()
        }
        Some("delete_because_wrong_repetition") => {
            "deleted because the resource changed how it is repeated (count/for_each added or removed)"
                .into()
        }
        Some("delete_because_count_index") => format!(
            "deleted because count index {} no longer exists",
            key.unwrap_or_else(|| "(unknown)".into())
        ),
        Some("delete_because_each_key") => format!(
            "deleted because for_each key {} no longer exists",
            key.unwrap_or_else(|| "(unknown)".into())
        ),
        Some("delete_because_no_move_target") => {
            "deleted because a moved block points at an address the template no longer has".into()
        }
        Some(other) => format!("{verb} (Terraform's reason: {other})"),
        None if transition == BuildIntent::Delete => {
            format!("{verb} because the workspace is being deleted")
        }
        // Older formats never say why (Terraform 1.0 only for replacements):
        // the report says the plan is silent rather than leave it unexplained.
        None if paths.is_empty() && format != PlanFormat::V1 => format!(
            "{verb} ({} plans do not say why)",
            format.written_by()
        ),
        None if paths.is_empty() => verb.to_string(),
        None => format!("{verb} because {} changed", join_words(&paths)),
    };
    match drift {
        Some(d) if d.deleted => format!("{text}; it was already deleted outside Terraform"),
        _ => text,
    }
}

fn instance_key(address: &str) -> Option<String> {
    Address::parse(address)
        .ok()
        .and_then(|a| a.key.map(|k| k.to_string()))
}

fn join_words(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::BuildIntent;
    use abode_contract::Transition as Build;

    #[test]
    fn only_a_claimed_start_is_judged_as_a_claim() {
        assert_eq!(
            BuildIntent::of_build(Build::Start, true),
            BuildIntent::Claim
        );
        assert_eq!(
            BuildIntent::of_build(Build::Start, false),
            BuildIntent::Start
        );
        assert_eq!(BuildIntent::of_build(Build::Stop, true), BuildIntent::Stop);
        assert_eq!(
            BuildIntent::of_build(Build::Delete, true),
            BuildIntent::Delete
        );
        for transition in [Build::Start, Build::Stop, Build::Delete] {
            assert_eq!(BuildIntent::from(transition).as_str(), transition.as_str());
        }
    }
}
