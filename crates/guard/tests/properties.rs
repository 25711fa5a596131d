//! Properties that must hold for every plan, not just the fixtures: a protected
//! resource is never destroyed in a start or stop build without the guard
//! objecting, and a sensitive value never reaches any output, whatever plan
//! format (older ones lack the explanations and sensitivity marks).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use abode_guard::{Address, Decision, Mode, Origin, Rule, Transition};
use proptest::prelude::*;
use serde_json::{json, Value};

const ACTIONS: &[&[&str]] = &[
    &["no-op"],
    &["create"],
    &["update"],
    &["delete"],
    &["delete", "create"],
    &["create", "delete"],
    &["forget"],
    &["read"],
];
const TYPES: &[&str] = &[
    "abode_volume",
    "abode_protect",
    "docker_volume",
    "terraform_data",
    "abode_process",
];

#[derive(Debug, Clone)]
struct Resource {
    module: Option<&'static str>,
    resource_type: &'static str,
    name: &'static str,
    index: Option<u8>,
    actions: &'static [&'static str],
    secret_attr: bool,
    deposed: bool,
}

impl Resource {
    fn address(&self) -> String {
        let mut s = String::new();
        if let Some(m) = self.module {
            s.push_str(&format!("module.{m}."));
        }
        s.push_str(&format!("{}.{}", self.resource_type, self.name));
        if let Some(i) = self.index {
            s.push_str(&format!("[{i}]"));
        }
        s
    }

    fn destroys(&self) -> bool {
        self.actions.contains(&"delete")
    }
}

fn resource() -> impl Strategy<Value = Resource> {
    (
        prop::option::of(prop::sample::select(vec!["home", "work"])),
        prop::sample::select(TYPES.to_vec()),
        prop::sample::select(vec!["home", "data", "main"]),
        prop::option::of(0u8..3),
        prop::sample::select(ACTIONS.to_vec()),
        any::<bool>(),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(module, resource_type, name, index, actions, secret_attr, deposed)| Resource {
                module,
                resource_type,
                name,
                index,
                actions,
                secret_attr,
                deposed,
            },
        )
}

fn secret(n: usize) -> String {
    format!("SECRET-{n:04}-do-not-print")
}

/// The plan formats read, with what each leaves out of a 1.x plan.
const FORMATS: &[&str] = &["1.2", "0.2", "0.1"];

fn plan_json(resources: &[Resource], format: &str) -> Value {
    let changes: Vec<Value> = resources
        .iter()
        .enumerate()
        .map(|(n, r)| {
            let value = |v: &str| {
                json!({"name": v, "password": secret(n), "nested": {"token": secret(n), "open": "fine"},
                       // An unmarked copy, as providers make (terraform_data's `output`).
                       "echo": format!("dsn://user:{}@db", secret(n))})
            };
            let sensitive = json!({"password": true, "nested": {"token": true}});
            let mut change = json!({
                "address": r.address(),
                "mode": "managed",
                "type": r.resource_type,
                "name": r.name,
                "change": {
                    "actions": r.actions,
                    "before": value("old"),
                    "after": value("new"),
                    "after_unknown": {},
                    "before_sensitive": sensitive,
                    "after_sensitive": sensitive,
                    "replace_paths": if r.secret_attr { json!([["password"], ["nested"], ["echo"]]) } else { json!([["name"]]) },
                },
                "action_reason": "replace_because_cannot_update",
            });
            if let Some(m) = r.module {
                change["module_address"] = json!(format!("module.{m}"));
            }
            if r.deposed {
                change["deposed"] = json!("0000abcd");
            }
            match format {
                // Terraform 1.0 explains only replacements.
                "0.2" if !r.actions.contains(&"create") => {
                    change.as_object_mut().unwrap().remove("action_reason");
                }
                // Terraform 0.12/0.13: no reasons and no sensitivity marks. The
                // replace paths stay, to check that unmarked values are not shown.
                "0.1" => {
                    change.as_object_mut().unwrap().remove("action_reason");
                    let inner = change["change"].as_object_mut().unwrap();
                    inner.remove("before_sensitive");
                    inner.remove("after_sensitive");
                }
                _ => {}
            }
            change
        })
        .collect();
    let drift: Vec<Value> = resources
        .iter()
        .enumerate()
        .filter(|(_, r)| r.secret_attr)
        .map(|(n, r)| {
            json!({
                "address": r.address(), "mode": "managed", "type": r.resource_type, "name": r.name,
                "change": {"actions": ["update"], "before": {"password": secret(n)}, "after": {"password": format!("{}-drifted", secret(n))},
                           "before_sensitive": {"password": true}, "after_sensitive": {"password": true}}
            })
        })
        .collect();
    let mut plan = json!({
        "format_version": format,
        "terraform_version": "1.11.4",
        "variables": {"db_password": {"value": secret(9999)}},
        "planned_values": {"root_module": {}},
        "resource_drift": drift,
        "resource_changes": changes,
        "configuration": {"root_module": {}}
    });
    if format == "0.1" {
        plan.as_object_mut().unwrap().remove("resource_drift");
    }
    plan
}

fn rules_for(resources: &[Resource], picks: &[(usize, u8)]) -> Vec<Rule> {
    picks
        .iter()
        .filter_map(|&(i, kind)| {
            let r = resources.get(i % resources.len().max(1))?;
            let mode = if kind % 2 == 0 {
                Mode::Confirm
            } else {
                Mode::Block
            };
            Some(match kind % 3 {
                0 => Rule::resource_type(r.resource_type, mode, Origin::Caller),
                1 => Rule::address(Address::parse(&r.address()).unwrap(), mode, Origin::Caller),
                _ => {
                    let mut a = Address::parse(&r.address()).unwrap();
                    a.key = None;
                    Rule::address(a, mode, Origin::Remembered)
                }
            })
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn protected_destruction_is_never_allowed_outside_delete(
        resources in prop::collection::vec(resource(), 1..12),
        picks in prop::collection::vec((0usize..12, 0u8..6), 0..6),
        transition in prop::sample::select(vec![Transition::Start, Transition::Stop, Transition::Delete]),
        format in prop::sample::select(FORMATS.to_vec()),
    ) {
        let bytes = serde_json::to_vec(&plan_json(&resources, format)).unwrap();
        let plan = abode_guard::read_plan_slice(&bytes).unwrap();
        let rules = rules_for(&resources, &picks);
        let report = abode_guard::evaluate(&plan, transition, &rules);

        for r in &resources {
            let address = Address::parse(&r.address()).unwrap();
            let protected = !matches!(r.resource_type, "abode_protect" | "abode_metadata")
                && rules.iter().any(|rule| rule.covers(Some(&address), r.resource_type));
            if protected && r.destroys() {
                prop_assert!(
                    report.protected_changes.iter().any(|c| c.address == r.address()),
                    "{} missing from the report", r.address()
                );
                if transition == Transition::Delete {
                    prop_assert_eq!(report.decision, Decision::Allow);
                } else {
                    prop_assert_ne!(report.decision, Decision::Allow);
                }
            }
        }
        if transition == Transition::Delete {
            prop_assert_eq!(report.decision, Decision::Allow);
        }

        let text = abode_guard::render_text(&report, false);
        let coloured = abode_guard::render_text(&report, true);
        let json = report.to_json();
        for output in [&text, &coloured, &json] {
            prop_assert!(!output.contains("SECRET-"), "secret leaked:\n{}", output);
        }
    }

    #[test]
    fn the_reader_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = abode_guard::read_plan_slice(&bytes);
        let _ = abode_guard::read_plan(bytes.as_slice());
    }

    #[test]
    fn the_reader_never_panics_on_mangled_plans(
        resources in prop::collection::vec(resource(), 1..4),
        cut in 0usize..4000,
        flip in 0usize..4000,
    ) {
        let mut bytes = serde_json::to_vec(&plan_json(&resources, "1.2")).unwrap();
        if let Some(b) = bytes.get_mut(flip) { *b = b'"'; }
        bytes.truncate(cut);
        if let Ok(plan) = abode_guard::read_plan_slice(&bytes) {
            let report = abode_guard::evaluate(&plan, Transition::Start, &[]);
            abode_guard::render_text(&report, false);
        }
    }
}
