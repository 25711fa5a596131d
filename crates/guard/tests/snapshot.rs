//! An `abode_protect`'s `snapshot` and `snapshot_command` (issue 47), as
//! the provisioner reads them before it applies a confirmed destroy: only
//! literals, a value Abode cannot read archives, and a command it cannot
//! read is an error the provisioner refuses on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use abode_guard::{annotations, SnapshotRule};
use serde_json::{json, Value};

/// The rule of one annotation on `abode_volume.home` with `extra`
/// expressions, and its warnings.
fn read(extra: Value) -> (SnapshotRule, Vec<String>) {
    let mut expressions =
        json!({"resource_id": {"references": ["abode_volume.home.id", "abode_volume.home"]}});
    for (key, value) in extra.as_object().unwrap() {
        expressions[key] = value.clone();
    }
    let plan = json!({"format_version": "1.2", "terraform_version": "1.11.4",
        "planned_values": {}, "resource_changes": [],
        "configuration": {"root_module": {"resources": [
            {"address": "abode_protect.home", "mode": "managed", "type": "abode_protect",
             "name": "home", "provider_config_key": "abode", "expressions": expressions}]}}});
    let plan = abode_guard::read_plan_slice(plan.to_string().as_bytes()).unwrap();
    let found = annotations(&plan);
    assert_eq!(found.rules.len(), 1, "{:?}", found.rules);
    (found.rules[0].snapshot.clone(), found.warnings)
}

/// (the protect's expressions, its `snapshot`, its `snapshot_command`
/// (`Err`: unreadable), how many warnings).
type Case = (Value, Option<bool>, Option<Result<String, ()>>, usize);

#[test]
fn snapshot_rules_are_read_from_literals_only() {
    let cases: Vec<Case> = vec![
        (json!({}), None, None, 0),
        (
            json!({"snapshot": {"constant_value": false}}),
            Some(false),
            None,
            0,
        ),
        (
            json!({"snapshot": {"constant_value": true}}),
            Some(true),
            None,
            0,
        ),
        // Unreadable: archived (one too many costs disk, one too few data).
        (
            json!({"snapshot": {"references": ["var.snap"]}}),
            Some(true),
            None,
            1,
        ),
        (
            json!({"snapshot_command": {"constant_value": "aws ec2 create-snapshot"}}),
            None,
            Some(Ok("aws ec2 create-snapshot".to_string())),
            0,
        ),
        (
            json!({"snapshot_command": {"references": ["local.command"]}}),
            None,
            Some(Err(())),
            1,
        ),
    ];
    for (extra, archive, command, warnings) in cases {
        let (rule, said) = read(extra.clone());
        assert_eq!(rule.archive, archive, "{extra}");
        assert_eq!(
            rule.command.clone().map(|c| c.map_err(|_| ())),
            command,
            "{extra}"
        );
        assert_eq!(said.len(), warnings, "{extra}: {said:?}");
    }
}

#[test]
fn a_volume_is_archived_unless_a_rule_says_false() {
    let default = SnapshotRule::default();
    let off = SnapshotRule {
        archive: Some(false),
        command: None,
    };
    assert!(SnapshotRule::archives(&[], "abode_volume"));
    assert!(SnapshotRule::archives(&[&default], "abode_volume"));
    assert!(!SnapshotRule::archives(&[&default, &off], "abode_volume"));
    assert!(!SnapshotRule::archives(&[&default], "aws_ebs_volume"));
}
