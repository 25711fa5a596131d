//! Retain-on-delete, driven by tables: how an `abode_protect`'s `on_delete`,
//! `retain_for` and `expire` are read, how they reach the workspace's memory
//! and back, and what `evaluate_delete` reports for the plan of a delete that
//! retains (the property over all plans is in `properties.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use abode_guard::{
    parse_retain_for, Address, BuildIntent, Decision, Expire, Initiator, Mode, Origin,
    RememberedProtection, RetainRule, Rule, Target,
};
use serde_json::{json, Value};

const DAY: u64 = 86_400;

/// A plan with `terraform_data.home` (and `terraform_data.cache`), each
/// protected by one annotation whose extra expressions are given, and the
/// changes given as (address, actions, deposed key).
fn plan(
    annotations: &[(&str, Value)],
    changes: &[(&str, &[&str], Option<&str>)],
) -> abode_guard::Plan {
    let resources: Vec<Value> = annotations
        .iter()
        .enumerate()
        .map(|(i, (target, extra))| {
            let mut expressions =
                json!({"resource_id": {"references": [format!("{target}.id"), target]}});
            for (k, v) in extra.as_object().unwrap() {
                expressions[k] = v.clone();
            }
            json!({"address": format!("abode_protect.p{i}"), "mode": "managed",
                   "type": "abode_protect", "name": format!("p{i}"),
                   "provider_config_key": "abode", "expressions": expressions})
        })
        .collect();
    let changes: Vec<Value> = changes
        .iter()
        .map(|(address, actions, deposed)| {
            let address = Address::parse(address).unwrap();
            let mut change = json!({
                "address": address.to_string(), "mode": "managed",
                "type": address.resource_type, "name": address.name,
                "change": {"actions": actions, "before": {"id": "i-1"}, "after": null,
                           "after_unknown": {}, "before_sensitive": {}, "after_sensitive": false},
            });
            if let Some(key) = &address.key {
                change["index"] = match key {
                    abode_guard::InstanceKey::Int(i) => json!(i),
                    abode_guard::InstanceKey::Str(s) => json!(s),
                };
            }
            if actions.iter().any(|a| *a == "delete" || *a == "forget") {
                change["action_reason"] = json!("delete_because_no_resource_config");
            }
            if let Some(deposed) = deposed {
                change["deposed"] = json!(deposed);
                change.as_object_mut().unwrap().remove("action_reason");
            }
            change
        })
        .collect();
    let plan = json!({"format_version": "1.2", "terraform_version": "1.11.4",
                      "planned_values": {}, "resource_changes": changes,
                      "configuration": {"root_module": {"resources": resources}}});
    abode_guard::read_plan_slice(plan.to_string().as_bytes()).unwrap()
}

fn literal(text: &str) -> Value {
    json!({"constant_value": text})
}

fn references() -> Value {
    json!({"references": ["var.keep"]})
}

/// What one annotation with `extra` expressions on `terraform_data.home`
/// makes the workspace remember after a start, and the warnings it gets.
fn read(extra: Value) -> (Option<RetainRule>, Vec<String>) {
    let plan = plan(
        &[("terraform_data.home", extra)],
        &[("terraform_data.home", &["update"], None)],
    );
    let memory = abode_guard::protections_after_apply(&plan, BuildIntent::Start, &[], &[]);
    assert_eq!(memory.len(), 1, "{memory:?}");
    assert_eq!(memory[0].address, "terraform_data.home");
    let warnings = abode_guard::evaluate(&plan, BuildIntent::Start, &[]).warnings;
    (memory[0].retain, warnings)
}

fn retain(days: Option<u64>, expire: Expire) -> Option<RetainRule> {
    Some(RetainRule {
        retain_for_secs: days.map(|d| d * DAY),
        expire,
    })
}

#[test]
fn annotations_are_read_from_literals_only() {
    // (case, expressions, the rule, a piece of each warning expected)
    let cases: Vec<(&str, Value, Option<RetainRule>, Vec<&str>)> = vec![
        ("no on_delete destroys", json!({}), None, vec![]),
        (
            "retain with every literal",
            json!({"on_delete": literal("retain"), "retain_for": literal("30d"), "expire": literal("destroy")}),
            retain(Some(30), Expire::Destroy),
            vec![],
        ),
        (
            "retain alone keeps for ever and holds",
            json!({"on_delete": literal("retain")}),
            retain(None, Expire::Hold),
            vec![],
        ),
        (
            "expire hold",
            json!({"on_delete": literal("retain"), "retain_for": literal("12h"), "expire": literal("hold")}),
            Some(RetainRule {
                retain_for_secs: Some(12 * 3600),
                expire: Expire::Hold,
            }),
            vec![],
        ),
        (
            "destroy is the default, spelled out",
            json!({"on_delete": literal("destroy"), "retain_for": literal("30d"), "expire": literal("destroy")}),
            None,
            vec![],
        ),
        (
            "destroy ignores a bad retain_for",
            json!({"on_delete": literal("destroy"), "retain_for": literal("soon")}),
            None,
            vec![],
        ),
        (
            "a non-literal on_delete retains, with a warning",
            json!({"on_delete": references(), "retain_for": literal("30d")}),
            retain(Some(30), Expire::Hold),
            vec!["on_delete is not the literal"],
        ),
        (
            "an unknown literal on_delete retains, with a warning",
            json!({"on_delete": literal("keep")}),
            retain(None, Expire::Hold),
            vec!["on_delete is not the literal"],
        ),
        (
            "a non-string literal on_delete retains, with a warning",
            json!({"on_delete": {"constant_value": true}}),
            retain(None, Expire::Hold),
            vec!["on_delete is not the literal"],
        ),
        (
            "a bad retain_for warns and keeps for ever",
            json!({"on_delete": literal("retain"), "retain_for": literal("1w"), "expire": literal("destroy")}),
            retain(None, Expire::Destroy),
            vec!["retain_for is not a duration"],
        ),
        (
            "a zero retain_for warns and keeps for ever",
            json!({"on_delete": literal("retain"), "retain_for": literal("0d")}),
            retain(None, Expire::Hold),
            vec!["retain_for is not a duration"],
        ),
        (
            "a non-literal retain_for warns and keeps for ever",
            json!({"on_delete": literal("retain"), "retain_for": references()}),
            retain(None, Expire::Hold),
            vec!["retain_for is not a literal"],
        ),
        (
            "an unknown expire warns and holds",
            json!({"on_delete": literal("retain"), "retain_for": literal("30d"), "expire": literal("later")}),
            retain(Some(30), Expire::Hold),
            vec!["expire is neither"],
        ),
        (
            "a non-literal expire warns and holds",
            json!({"on_delete": literal("retain"), "retain_for": literal("30d"), "expire": references()}),
            retain(Some(30), Expire::Hold),
            vec!["expire is not a literal"],
        ),
    ];
    for (case, extra, want, want_warnings) in cases {
        let (got, warnings) = read(extra);
        assert_eq!(got, want, "{case}");
        let about_retain: Vec<&String> = warnings
            .iter()
            .filter(|w| {
                ["on_delete", "retain_for", "expire"]
                    .iter()
                    .any(|a| w.contains(a))
            })
            .collect();
        assert_eq!(
            about_retain.len(),
            want_warnings.len(),
            "{case}: {warnings:?}"
        );
        for (warning, piece) in about_retain.iter().zip(&want_warnings) {
            assert!(
                warning.starts_with("abode_protect.p0: "),
                "{case}: {warning}"
            );
            assert!(warning.contains(piece), "{case}: {warning}");
        }
    }
}

#[test]
fn retain_for_is_a_whole_number_of_days_hours_or_minutes() {
    let ten_years = 10 * 366 * DAY;
    let cases: &[(&str, Option<u64>)] = &[
        ("30d", Some(30 * DAY)),
        ("12h", Some(12 * 3600)),
        ("90m", Some(90 * 60)),
        ("1d", Some(DAY)),
        ("1m", Some(60)),
        ("007d", Some(7 * DAY)),
        (" 5d ", Some(5 * DAY)),
        ("\t5d\n", Some(5 * DAY)),
        ("3660d", Some(ten_years)),
        ("87840h", Some(ten_years)),
        ("3661d", None),
        ("87841h", None),
        ("0d", None),
        ("0h", None),
        ("000m", None),
        ("1w", None),
        ("1y", None),
        ("1s", None),
        ("-1d", None),
        ("+1d", None),
        ("1.5d", None),
        ("1e3m", None),
        ("5 d", None),
        ("5dd", None),
        ("d5", None),
        ("5D", None),
        ("5H", None),
        ("d", None),
        ("h", None),
        ("", None),
        ("   ", None),
        ("30", None),
        ("３０d", None),
        ("5d\u{301}", None),
        ("é", None),
        ("18446744073709551615d", None),
        ("18446744073709551616d", None),
        ("99999999999999999999999999999999m", None),
        ("213503982334601d", None),
    ];
    for (text, want) in cases {
        assert_eq!(parse_retain_for(text), *want, "{text:?}");
    }
}

/// Annotations given as (target, extra expressions).
type Annotations<'a> = Vec<(&'a str, Value)>;

fn remembered(address: &str, mode: Mode, retain: Option<RetainRule>) -> RememberedProtection {
    RememberedProtection {
        address: address.into(),
        mode,
        retain,
    }
}

#[test]
fn memory_keeps_what_retains_longest() {
    let start = |annotations: &[(&str, Value)], memory: &[RememberedProtection]| {
        let plan = plan(
            annotations,
            &[
                ("terraform_data.home", &["update"], None),
                ("terraform_data.cache", &["no-op"], None),
            ],
        );
        abode_guard::protections_after_apply(&plan, BuildIntent::Start, &[], memory)
    };
    let home = "terraform_data.home";
    let retains = |days: &str, expire: &str| json!({"on_delete": literal("retain"), "retain_for": literal(days), "expire": literal(expire)});
    let for_ever = json!({"on_delete": literal("retain"), "expire": literal("destroy")});
    let destroys = json!({"mode": literal("block"), "on_delete": literal("destroy")});
    // (case, annotations on home, what is remembered of home)
    let cases: Vec<(&str, Annotations, RememberedProtection)> = vec![
        (
            "a retaining annotation is remembered with its rule",
            vec![(home, retains("30d", "destroy"))],
            remembered(home, Mode::Confirm, retain(Some(30), Expire::Destroy)),
        ),
        (
            "a retaining rule wins over a destroying one, the strictest mode over both",
            vec![(home, destroys.clone()), (home, retains("30d", "hold"))],
            remembered(home, Mode::Block, retain(Some(30), Expire::Hold)),
        ),
        (
            "the same, in the other order",
            vec![(home, retains("30d", "hold")), (home, destroys)],
            remembered(home, Mode::Block, retain(Some(30), Expire::Hold)),
        ),
        (
            "the longer retain_for wins",
            vec![
                (home, retains("30d", "destroy")),
                (home, retains("12h", "destroy")),
            ],
            remembered(home, Mode::Confirm, retain(Some(30), Expire::Destroy)),
        ),
        (
            // The derived order puts None first: `max` kept 30 days.
            "for ever wins over any retain_for",
            vec![(home, for_ever.clone()), (home, retains("30d", "destroy"))],
            remembered(home, Mode::Confirm, retain(None, Expire::Destroy)),
        ),
        (
            "for ever wins in the other order too",
            vec![(home, retains("30d", "destroy")), (home, for_ever)],
            remembered(home, Mode::Confirm, retain(None, Expire::Destroy)),
        ),
        (
            // The derived order puts Destroy after Hold: `max` applied the destroy.
            "hold wins over destroy",
            vec![
                (home, retains("30d", "hold")),
                (home, retains("30d", "destroy")),
            ],
            remembered(home, Mode::Confirm, retain(Some(30), Expire::Hold)),
        ),
        (
            "each part of the rule is kept from whichever keeps longer",
            vec![
                (home, retains("90d", "destroy")),
                (home, retains("30d", "hold")),
            ],
            remembered(home, Mode::Confirm, retain(Some(90), Expire::Hold)),
        ),
    ];
    for (case, annotations, want) in cases {
        let after = start(&annotations, &[]);
        assert_eq!(after, vec![want], "{case}");
    }

    // Memory of a retaining rule outlives the annotation, and combines with a new one.
    let memory = [remembered(
        home,
        Mode::Block,
        retain(Some(7), Expire::Destroy),
    )];
    assert_eq!(
        start(&[], &memory),
        vec![remembered(
            home,
            Mode::Block,
            retain(Some(7), Expire::Destroy)
        )]
    );
    assert_eq!(
        start(&[(home, retains("1d", "hold"))], &memory),
        vec![remembered(home, Mode::Block, retain(Some(7), Expire::Hold))]
    );
    // A caller's rule (which never retains) leaves the retain of memory alone.
    let caller = [Rule::resource_type(
        "terraform_data",
        Mode::Confirm,
        Origin::Caller,
    )];
    let plan = plan(&[], &[("terraform_data.home", &["update"], None)]);
    assert_eq!(
        abode_guard::protections_after_apply(&plan, BuildIntent::Start, &caller, &memory),
        vec![remembered(
            home,
            Mode::Block,
            retain(Some(7), Expire::Destroy)
        )]
    );
    // A delete forgets everything, retained or not: the records of what it
    // retains are the platform's, not the workspace's memory.
    let plan = self::plan(&[], &[("terraform_data.home", &["forget"], None)]);
    assert!(
        abode_guard::protections_after_apply(&plan, BuildIntent::Delete, &[], &memory).is_empty()
    );
}

#[test]
fn keeping_longest_is_symmetric_and_never_keeps_less() {
    let rules: Vec<RetainRule> = [None, Some(60), Some(DAY), Some(30 * DAY)]
        .into_iter()
        .flat_map(|secs| {
            [Expire::Hold, Expire::Destroy].map(|expire| RetainRule {
                retain_for_secs: secs,
                expire,
            })
        })
        .collect();
    // How long each keeps, and whether its end is held; bigger keeps more.
    let keeps = |r: RetainRule| {
        (
            r.retain_for_secs.unwrap_or(u64::MAX),
            r.expire == Expire::Hold,
        )
    };
    for &a in &rules {
        assert_eq!(a.keeping_longest(a), a);
        for &b in &rules {
            let both = a.keeping_longest(b);
            assert_eq!(both, b.keeping_longest(a));
            for r in [a, b] {
                assert!(
                    keeps(both).0 >= keeps(r).0 && keeps(both).1 >= keeps(r).1,
                    "{a:?} {b:?}"
                );
            }
            assert!(both == a || both == b || (keeps(both) == (keeps(a).0.max(keeps(b).0), true)));
        }
    }
}

#[test]
fn memory_gives_back_rules_that_retain() {
    let memory = [
        remembered(
            "module.home[0].terraform_data.home",
            Mode::Block,
            retain(Some(30), Expire::Destroy),
        ),
        remembered("terraform_data.cache", Mode::Confirm, None),
        remembered("not an address", Mode::Block, retain(None, Expire::Hold)),
    ];
    let rules = abode_guard::remembered_rules(&memory);
    assert_eq!(rules.len(), 2);
    assert_eq!(
        rules[0].target,
        Target::Address(Address::parse("module.home[0].terraform_data.home").unwrap())
    );
    assert_eq!(rules[0].mode, Mode::Block);
    assert_eq!(rules[0].origin, Origin::Remembered);
    assert_eq!(rules[0].retain, retain(Some(30), Expire::Destroy));
    assert_eq!(rules[1].retain, None);

    // Stored as JSON; memory written before retain reads as not retaining.
    let json = serde_json::to_value(&memory[..2]).unwrap();
    assert_eq!(
        json,
        json!([
            {"address": "module.home[0].terraform_data.home", "mode": "block",
             "retain": {"retain_for_secs": 30 * DAY, "expire": "destroy"}},
            {"address": "terraform_data.cache", "mode": "confirm"},
        ])
    );
    let back: Vec<RememberedProtection> = serde_json::from_value(json).unwrap();
    assert_eq!(back, memory[..2]);
    let old: RememberedProtection =
        serde_json::from_str(r#"{"address":"terraform_data.home","mode":"confirm"}"#).unwrap();
    assert_eq!(old.retain, None);
    let for_ever: RememberedProtection =
        serde_json::from_str(r#"{"address":"terraform_data.home","mode":"confirm","retain":{}}"#)
            .unwrap();
    assert_eq!(for_ever.retain, retain(None, Expire::Hold));
}

fn delete(
    changes: &[(&str, &[&str], Option<&str>)],
    initiator: Initiator,
    retain: &[&str],
) -> abode_guard::Report {
    let plan = plan(&[], changes);
    let retain: Vec<Address> = retain.iter().map(|a| Address::parse(a).unwrap()).collect();
    let rules = [Rule::resource_type(
        "terraform_data",
        Mode::Block,
        Origin::Caller,
    )];
    abode_guard::evaluate_delete(&plan, initiator, &rules, &retain)
}

fn retained(report: &abode_guard::Report) -> Vec<(String, Option<String>)> {
    report
        .retained
        .iter()
        .map(|r| (r.address.clone(), r.deposed.clone()))
        .collect()
}

#[test]
fn a_delete_forgets_what_it_retains_and_blocks_if_it_would_destroy_it() {
    let forget: &[&str] = &["forget"];
    let destroy: &[&str] = &["delete"];
    // Every instance of the resource is retained, whatever key the list names.
    let report = delete(
        &[
            ("terraform_data.home[0]", forget, None),
            ("terraform_data.home[1]", forget, None),
            ("terraform_data.cache", destroy, None),
        ],
        Initiator::Person,
        &["terraform_data.home[1]"],
    );
    assert_eq!(report.decision, Decision::Allow);
    assert_eq!(
        retained(&report),
        [
            ("terraform_data.home[0]".into(), None),
            ("terraform_data.home[1]".into(), None)
        ]
    );
    assert_eq!(report.protected_changes.len(), 1);
    assert_eq!(report.protected_changes[0].address, "terraform_data.cache");
    assert_eq!(
        report.protected_changes[0].reason,
        "deleted because the workspace is being deleted"
    );
    let json: Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(
        json["retained"],
        json!([{"address": "terraform_data.home[0]", "resource_type": "terraform_data"},
               {"address": "terraform_data.home[1]", "resource_type": "terraform_data"}])
    );

    // One instance destroyed instead: blocked, whoever asked.
    for initiator in [Initiator::Person, Initiator::System] {
        let report = delete(
            &[
                ("terraform_data.home[0]", forget, None),
                ("terraform_data.home[1]", destroy, None),
            ],
            initiator,
            &["terraform_data.home"],
        );
        assert_eq!(report.decision, Decision::Block);
        assert_eq!(retained(&report), [("terraform_data.home[0]".into(), None)]);
        assert_eq!(report.protected_changes.len(), 1);
        let change = &report.protected_changes[0];
        assert_eq!(change.address, "terraform_data.home[1]");
        assert_eq!(change.outcome, Decision::Block);
        assert!(
            change.reason.contains("this delete retains it"),
            "{}",
            change.reason
        );
    }

    // Module keys are left out too: `removed` names the resource in every module instance.
    let report = delete(
        &[
            ("module.m[0].terraform_data.home", forget, None),
            ("module.m[1].terraform_data.home", destroy, None),
        ],
        Initiator::Person,
        &["module.m[0].terraform_data.home"],
    );
    assert_eq!(report.decision, Decision::Block);
    assert_eq!(
        retained(&report),
        [("module.m[0].terraform_data.home".into(), None)]
    );
}

#[test]
fn a_deposed_object_of_a_retained_resource_is_retained_too() {
    // Terraform forgets the deposed objects of a resource a `removed { destroy
    // = false }` names (NodePlanDeposedResourceInstanceObject plans a forget
    // for them). The report must list each: the platform keeps a record of
    // what it lists, and an object it left out would run on with no record.
    let report = delete(
        &[
            ("terraform_data.home", &["forget"], None),
            ("terraform_data.home", &["forget"], Some("0000abcd")),
        ],
        Initiator::Person,
        &["terraform_data.home"],
    );
    assert_eq!(report.decision, Decision::Allow);
    assert_eq!(
        retained(&report),
        [
            ("terraform_data.home".into(), None),
            ("terraform_data.home".into(), Some("0000abcd".into()))
        ]
    );
    assert!(report.protected_changes.is_empty());
    assert!(report.unprotected_destroys.is_empty());
    let json: Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["retained"][0].get("deposed"), None);
    assert_eq!(json["retained"][1]["deposed"], json!("0000abcd"));
    let text = abode_guard::render_text(&report, false);
    assert!(
        text.contains(
            "  = terraform_data.home\n  = terraform_data.home (deposed object 0000abcd)\n"
        ),
        "{text}"
    );

    // A deposed object the plan deletes instead is destroyed: blocked.
    let report = delete(
        &[
            ("terraform_data.home", &["forget"], None),
            ("terraform_data.home", &["delete"], Some("0000abcd")),
        ],
        Initiator::Person,
        &["terraform_data.home"],
    );
    assert_eq!(report.decision, Decision::Block);
    assert_eq!(retained(&report), [("terraform_data.home".into(), None)]);
    assert_eq!(
        report.protected_changes[0].deposed.as_deref(),
        Some("0000abcd")
    );
}

#[test]
fn without_retain_a_delete_is_judged_as_before() {
    let changes: &[(&str, &[&str], Option<&str>)] = &[
        ("terraform_data.home", &["delete"], None),
        ("terraform_data.cache", &["forget"], None),
        ("terraform_data.old", &["delete"], Some("0000abcd")),
    ];
    let rules = [Rule::resource_type(
        "terraform_data",
        Mode::Block,
        Origin::Caller,
    )];
    for initiator in [Initiator::Person, Initiator::System] {
        let plan = plan(&[], changes);
        let report = abode_guard::evaluate_delete(&plan, initiator, &rules, &[]);
        assert_eq!(
            report,
            abode_guard::evaluate_as(&plan, BuildIntent::Delete, initiator, &rules)
        );
        assert!(report.retained.is_empty());
        assert!(!report.to_json().contains("retained"));
    }
}
