//! Protection memory: which resource instances of a workspace stay protected
//! after a build, whatever later template versions say.
//!
//! A template version that drops or renames an `abode_protect` annotation must not
//! drop the protection with it, so the platform stores this list after every
//! successful build and hands it back to [`crate::evaluate`] as rules.

use crate::address::Address;
use crate::annotation;
use crate::decision::{Action, BuildIntent};
use crate::plan::{Plan, ResourceMode};
use crate::rules::{self, Mode, Origin, RetainRule, Rule};
use serde::{Deserialize, Serialize};

/// One protected resource instance a workspace remembers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RememberedProtection {
    pub address: String,
    pub mode: Mode,
    /// Whether a workspace delete retains it (`on_delete = "retain"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain: Option<RetainRule>,
}

/// The remembered protections as rules for [`crate::evaluate`]; entries whose
/// address does not parse are skipped (they cannot match any plan entry).
pub fn remembered_rules(memory: &[RememberedProtection]) -> Vec<Rule> {
    memory
        .iter()
        .filter_map(|m| {
            Address::parse(&m.address).ok().map(|a| {
                let mut rule = Rule::address(a, m.mode, Origin::Remembered);
                rule.retain = m.retain;
                rule
            })
        })
        .collect()
}

/// What the workspace remembers after `plan` was applied successfully.
///
/// Every managed instance that still exists after the apply and is covered by a
/// rule (the caller's, an annotation, or earlier memory, followed through `moved`
/// blocks by `previous_address`) is remembered with its strictest mode; earlier
/// memory of resources the plan does not mention at all is kept. A delete build
/// forgets everything: the workspace is gone.
pub fn protections_after_apply(
    plan: &Plan,
    transition: BuildIntent,
    rules: &[Rule],
    memory: &[RememberedProtection],
) -> Vec<RememberedProtection> {
    if transition == BuildIntent::Delete {
        return Vec::new();
    }
    let mut all_rules = rules.to_vec();
    all_rules.extend(rules::annotations(plan).rules);
    all_rules.extend(remembered_rules(memory));
    let mut remembered: Vec<RememberedProtection> = Vec::new();
    for change in &plan.changes {
        if change.mode == ResourceMode::Data
            || annotation::is_annotation_type(&change.resource_type)
            || change.deposed.is_some()
        {
            continue;
        }
        let survives = !matches!(
            Action::classify(&change.actions),
            Action::Delete | Action::Forget | Action::Read
        );
        if !survives {
            continue;
        }
        let addresses: Vec<Address> = std::iter::once(&change.address)
            .chain(change.previous_address.as_ref())
            .filter_map(|a| Address::parse(a).ok())
            .collect();
        let covering: Vec<&Rule> = all_rules
            .iter()
            .filter(|rule| {
                addresses
                    .iter()
                    .any(|a| rule.covers(Some(a), &change.resource_type))
            })
            .collect();
        // Any rule that retains wins over one that destroys, and of several
        // that retain, what keeps longest: a delete that keeps too much is
        // undone with one command, one that destroys is not. (Not `max`: the
        // derived order puts "for ever" first and "destroy" after "hold".)
        let retain = covering
            .iter()
            .filter_map(|rule| rule.retain)
            .reduce(RetainRule::keeping_longest);
        if let Some(mode) = covering.iter().map(|rule| rule.mode).max() {
            remembered.push(RememberedProtection {
                address: change.address.clone(),
                mode,
                retain,
            });
        }
    }
    // A plan that leaves a resource out (`-target`, `-refresh-only`) says nothing
    // about it, so its protection is kept as it was.
    let mentioned: Vec<Address> = plan
        .changes
        .iter()
        .flat_map(|c| std::iter::once(&c.address).chain(c.previous_address.as_ref()))
        .filter_map(|a| Address::parse(a).ok())
        .collect();
    for entry in memory {
        let untouched = match Address::parse(&entry.address) {
            Ok(address) => !mentioned.iter().any(|m| address.covers(m)),
            Err(_) => true,
        };
        if untouched {
            remembered.push(entry.clone());
        }
    }
    remembered.sort();
    remembered.dedup();
    remembered
}
