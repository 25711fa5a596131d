//! The plan formats the guard reads, and what the older ones cannot say.
//!
//! Teams do not all run a current Terraform, and a guard that refuses their plans
//! protects nothing. `terraform show -json` has written three families of
//! `format_version`: "0.1" (Terraform 0.12 to 0.15), "0.2" (Terraform 1.0) and
//! "1.x" (Terraform 1.1 on). Their `resource_changes` and `actions` mean the same,
//! and the decision is made from those alone, so every family is decided alike:
//! a missing explanation never turns a destroyed protected resource into `allow`.
//!
//! What the older families lack are the explanations (`action_reason`,
//! `replace_paths`, `resource_drift`, `previous_address`). The report names them,
//! so that an operator reading a terse report knows the plan, not the guard, is
//! silent. Any other `format_version` (a newer major version, an unknown minor
//! 0.x) may change what the fields mean, so it is refused rather than guessed at.

use serde::{Deserialize, Serialize};

/// A `format_version` family the reader knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanFormat {
    /// "0.1": Terraform 0.12 to 0.15.
    V0_1,
    /// "0.2": Terraform 1.0.
    V0_2,
    /// "1.x": Terraform 1.1 and later.
    V1,
}

impl PlanFormat {
    /// The family of a `format_version`, or `None` for one the reader does not know.
    pub fn parse(format_version: &str) -> Option<PlanFormat> {
        match format_version {
            "0.1" => Some(PlanFormat::V0_1),
            "0.2" => Some(PlanFormat::V0_2),
            "1" => Some(PlanFormat::V1),
            v if v.starts_with("1.") => Some(PlanFormat::V1),
            _ => None,
        }
    }

    /// Which Terraform releases write this format, for the report.
    pub fn written_by(self) -> &'static str {
        match self {
            PlanFormat::V0_1 => "Terraform 0.12 to 0.15",
            PlanFormat::V0_2 => "Terraform 1.0",
            PlanFormat::V1 => "Terraform 1.1 or later",
        }
    }

    /// The explanations a plan of this format cannot give, learnt from real plans
    /// of Terraform 0.13.5 and 1.0.3 (tests/fixtures/tf*-*); empty for 1.x.
    pub fn missing(self) -> Vec<MissingExplanation> {
        let mut missing = Vec::new();
        let mut add = |field: &str, consequence: &str| {
            missing.push(MissingExplanation {
                field: field.to_string(),
                consequence: consequence.to_string(),
            })
        };
        match self {
            PlanFormat::V1 => {}
            PlanFormat::V0_1 => {
                add(
                    "action_reason",
                    "why Terraform deletes or replaces a resource: the report says only what it does",
                );
                add("replace_paths", "which attributes force a replacement");
                add(
                    "resource_drift",
                    "what changed outside Terraform since the last apply: a protected resource \
                     deleted outside Terraform and planned again looks like a new one, and is allowed",
                );
            }
            PlanFormat::V0_2 => add(
                "action_reason",
                "why Terraform deletes a resource (Terraform 1.0 explains only replacements)",
            ),
        }
        if self != PlanFormat::V1 {
            add(
                "previous_address",
                "whether a resource was renamed (moved blocks came with Terraform 1.1): a rename \
                 is a delete of the old address and a create of the new one, and the delete is \
                 judged like any other",
            );
        }
        missing
    }
}

/// One explanation a plan's format cannot give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingExplanation {
    /// The plan field that later formats carry, e.g. `action_reason`.
    pub field: String,
    /// What the report therefore cannot say, in plain words.
    pub consequence: String,
}

/// In a report on a plan older than format 1.x: what its format cannot say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OlderPlanFormat {
    pub format_version: String,
    /// e.g. `Terraform 1.0`.
    pub written_by: String,
    #[serde(default)]
    pub missing: Vec<MissingExplanation>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_versions_only() {
        for (version, format) in [
            ("0.1", Some(PlanFormat::V0_1)),
            ("0.2", Some(PlanFormat::V0_2)),
            ("1", Some(PlanFormat::V1)),
            ("1.0", Some(PlanFormat::V1)),
            ("1.2", Some(PlanFormat::V1)),
            ("0.3", None),
            ("0.0", None),
            ("0.10", None),
            ("0.1.0", None),
            ("0", None),
            ("2.0", None),
            ("10.1", None),
            ("", None),
        ] {
            assert_eq!(PlanFormat::parse(version), format, "{version:?}");
        }
    }

    #[test]
    fn only_older_formats_miss_explanations() {
        assert!(PlanFormat::V1.missing().is_empty());
        let fields =
            |f: PlanFormat| -> Vec<String> { f.missing().into_iter().map(|m| m.field).collect() };
        assert_eq!(
            fields(PlanFormat::V0_1),
            [
                "action_reason",
                "replace_paths",
                "resource_drift",
                "previous_address"
            ]
        );
        assert_eq!(
            fields(PlanFormat::V0_2),
            ["action_reason", "previous_address"]
        );
    }
}
