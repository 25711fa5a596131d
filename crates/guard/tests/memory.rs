//! Protection memory across builds, on real plans from the fixtures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use abode_guard::{BuildIntent, Mode, RememberedProtection};
use std::path::Path;

fn check(case: &str, transition: BuildIntent, memory: &[(&str, Mode)], expect: &[(&str, Mode)]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(case)
        .join("plan.json");
    let plan = abode_guard::read_plan_slice(&std::fs::read(path).unwrap()).unwrap();
    let memory: Vec<RememberedProtection> = memory
        .iter()
        .map(|(a, m)| RememberedProtection {
            address: a.to_string(),
            mode: *m,
            retain: None,
        })
        .collect();
    let after = abode_guard::protections_after_apply(&plan, transition, &[], &memory);
    let after: Vec<(&str, Mode)> = after.iter().map(|m| (m.address.as_str(), m.mode)).collect();
    assert_eq!(after, expect, "{case}");
}

#[test]
fn annotations_are_remembered() {
    check(
        "annotation-root",
        BuildIntent::Start,
        &[],
        &[("terraform_data.home", Mode::Confirm)],
    );
    check(
        "annotation-block",
        BuildIntent::Stop,
        &[],
        &[("terraform_data.home", Mode::Block)],
    );
    check(
        "annotation-count",
        BuildIntent::Start,
        &[],
        &[("terraform_data.home[0]", Mode::Confirm)],
    );
    // The abode provider's own volume is the home disk templates protect.
    check(
        "provider-replace-protected-volume",
        BuildIntent::Start,
        &[],
        &[("abode_volume.home", Mode::Confirm)],
    );
}

#[test]
fn memory_outlives_the_annotation_and_follows_moves() {
    check(
        "moved-rename",
        BuildIntent::Start,
        &[("terraform_data.home", Mode::Block)],
        &[("terraform_data.home_volume", Mode::Block)],
    );
    check(
        "replace-triggers",
        BuildIntent::Start,
        &[("terraform_data.home", Mode::Confirm)],
        &[("terraform_data.home", Mode::Confirm)],
    );
}

#[test]
fn memory_of_resources_the_plan_does_not_mention_is_kept() {
    // A plan that leaves a resource out (`-target`, `-refresh-only`) says nothing
    // about it: its protection must survive the build.
    check(
        "replace-triggers",
        BuildIntent::Start,
        &[
            ("terraform_data.home", Mode::Confirm),
            ("terraform_data.elsewhere[\"b\"]", Mode::Block),
        ],
        &[
            ("terraform_data.elsewhere[\"b\"]", Mode::Block),
            ("terraform_data.home", Mode::Confirm),
        ],
    );
}

#[test]
fn destroyed_and_deleted_workspaces_forget() {
    check(
        "block-removed",
        BuildIntent::Stop,
        &[("terraform_data.home", Mode::Confirm)],
        &[],
    );
    check(
        "destroy-delete",
        BuildIntent::Delete,
        &[("terraform_data.home", Mode::Block)],
        &[],
    );
    check(
        "removed-forget",
        BuildIntent::Stop,
        &[("terraform_data.home", Mode::Block)],
        &[],
    );
}

#[test]
fn remembered_protections_hold_in_the_guard() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/block-removed/plan.json");
    let plan = abode_guard::read_plan_slice(&std::fs::read(path).unwrap()).unwrap();
    let rules = abode_guard::remembered_rules(&[RememberedProtection {
        address: "terraform_data.home".into(),
        mode: Mode::Confirm,
        retain: None,
    }]);
    let report = abode_guard::evaluate(&plan, BuildIntent::Stop, &rules);
    assert_eq!(report.decision, abode_guard::Decision::Confirm);
    assert_eq!(
        report.protected_changes[0].protected_by[0].by,
        "remembered protection of terraform_data.home"
    );
}
