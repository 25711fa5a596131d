//! An ephemeral parameter's value applies to one build and is kept by none
//! of the platform's records: a build keeps the values it ran with only
//! while it may run (the store puts the workspace's values, without the
//! ephemeral ones, in their place when it ends or is held), and what a run
//! hands the server to keep is masked here: its log lines and the plan JSON
//! kept with the build. What Terraform itself writes (the state, through
//! the state backend, and the saved plan of a held build, which its apply
//! needs) is Terraform's and is kept as written.

use std::borrow::Cow;

use abode_store::{Build, TemplateVersion};
use serde_json::Value;

/// What a masked value reads as.
pub(crate) const MASK: &str = "(ephemeral parameter value)";

/// Values shorter than this are masked only where a whole string is the
/// value: masking every `1` or `on` inside log lines and plan text would
/// garble them and hide nothing a reader could not guess.
const MIN_MASKED_INSIDE: usize = 4;

/// The keys of the plan JSON that name things rather than hold values: an
/// address, an instance key, a type. They are left alone, so that what
/// the server reads back from the kept plan (which resources changed, and
/// how) is still true.
const NAMING_KEYS: &[&str] = &[
    "address",
    "previous_address",
    "module_address",
    "mode",
    "type",
    "name",
    "index",
    "index_key",
    "provider_name",
    "provider_config_key",
    "actions",
    "action_reason",
    "deposed",
    "format_version",
    "terraform_version",
];

/// The values of a build's ephemeral parameters, longest first (a value
/// inside another is masked with it).
#[derive(Debug, Clone, Default)]
pub(crate) struct EphemeralValues(Vec<String>);

impl EphemeralValues {
    /// The values `build` runs with of the parameters `version` declares
    /// ephemeral (none for a build that runs on the workspace's values).
    pub(crate) fn of(version: &TemplateVersion, build: &Build) -> EphemeralValues {
        let Some(values) = &build.parameters else {
            return EphemeralValues::default();
        };
        let mut found: Vec<String> = version
            .parameters
            .iter()
            .flatten()
            .filter(|declaration| declaration.ephemeral)
            .filter_map(|declaration| values.get(&declaration.name))
            .filter(|value| !value.is_empty())
            .cloned()
            .collect();
        found.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        found.dedup();
        EphemeralValues(found)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `text` with every ephemeral value in it masked.
    pub(crate) fn mask<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut masked = Cow::Borrowed(text);
        for value in &self.0 {
            if masked == value.as_str() {
                return Cow::Owned(MASK.to_string());
            }
            if value.chars().count() >= MIN_MASKED_INSIDE && masked.contains(value.as_str()) {
                masked = Cow::Owned(masked.replace(value.as_str(), MASK));
            }
        }
        masked
    }

    /// The plan JSON as the server keeps it: every value masked, names
    /// (addresses, instance keys, types) left as they are. Unchanged when
    /// the build has no ephemeral value; the bytes as given when they are
    /// not JSON (the guard refused them already).
    pub(crate) fn plan_to_keep<'a>(&self, plan_json: &'a [u8]) -> Cow<'a, [u8]> {
        if self.is_empty() {
            return Cow::Borrowed(plan_json);
        }
        let Ok(mut plan) = serde_json::from_slice::<Value>(plan_json) else {
            return Cow::Borrowed(plan_json);
        };
        self.mask_values(&mut plan);
        match serde_json::to_vec(&plan) {
            Ok(bytes) => Cow::Owned(bytes),
            Err(_) => Cow::Borrowed(plan_json),
        }
    }

    fn mask_values(&self, value: &mut Value) {
        match value {
            Value::String(text) => {
                if let Cow::Owned(masked) = self.mask(text) {
                    *text = masked;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.mask_values(item)),
            Value::Object(fields) => {
                for (key, field) in fields.iter_mut() {
                    if !NAMING_KEYS.contains(&key.as_str()) {
                        self.mask_values(field);
                    }
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(values: &[&str]) -> EphemeralValues {
        let mut found: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        found.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        EphemeralValues(found)
    }

    #[test]
    fn log_lines_are_masked() {
        let secrets = values(&["hunter2-token", "on"]);
        let cases = [
            (
                "+ input = \"hunter2-token\"",
                "+ input = \"(ephemeral parameter value)\"",
            ),
            ("hunter2-token", MASK),
            // A short value only where it is the whole text.
            ("on", MASK),
            ("configuration done", "configuration done"),
            ("nothing here", "nothing here"),
        ];
        for (line, masked) in cases {
            assert_eq!(secrets.mask(line), masked, "{line}");
        }
    }

    #[test]
    fn the_kept_plan_masks_values_and_keeps_names() {
        let secrets = values(&["hunter2-token"]);
        let plan = serde_json::json!({
            "format_version": "1.2",
            "prior_state": {"values": {"root_module": {"resources": [{
                "address": "data.abode_parameter.token",
                "mode": "data", "type": "abode_parameter", "name": "token",
                "values": {"name": "token", "ephemeral": true, "value": "hunter2-token"}
            }]}}},
            "resource_changes": [{
                "address": "terraform_data.x[\"hunter2-token\"]",
                "index": "hunter2-token",
                "change": {"actions": ["create"], "before": null,
                    "after": {"input": "Bearer hunter2-token", "n": 1}}
            }]
        });
        let bytes = serde_json::to_vec(&plan).unwrap();
        let kept = secrets.plan_to_keep(&bytes);
        let kept: Value = serde_json::from_slice(&kept).unwrap();
        let resource = &kept["prior_state"]["values"]["root_module"]["resources"][0];
        assert_eq!(resource["values"]["value"], MASK);
        assert_eq!(resource["address"], "data.abode_parameter.token");
        let change = &kept["resource_changes"][0];
        assert_eq!(change["change"]["after"]["input"], format!("Bearer {MASK}"));
        assert_eq!(change["change"]["after"]["n"], 1);
        // Names are what the server reads back: left as they are.
        assert_eq!(change["address"], "terraform_data.x[\"hunter2-token\"]");
        assert_eq!(change["index"], "hunter2-token");
        // Nothing to mask: the bytes as Terraform wrote them.
        let none = EphemeralValues::default();
        assert!(matches!(none.plan_to_keep(&bytes), Cow::Borrowed(_)));
    }
}
