//! Explains a held or blocked build from the plan guard's report (the guard's
//! JSON schema, docs/plan-check.md) in plain words, with the exact command
//! that lets the user go on.
//!
//! The report arrives already redacted by the server; this module only
//! arranges it, so no sensitive value can appear that the server did not send.
//! Its addresses, reasons and values come from the template and the plan
//! (other people's text), so every line is passed through
//! [`visible`](crate::output::visible) before anyone prints it.

use abode_sdk::Build;
use serde_json::Value;

use crate::output::{time, visible};

/// Terraform-like marker for an action.
fn marker(action: &str) -> &'static str {
    match action {
        "delete" => "-",
        "replace" => "-/+",
        "replace_create_before_destroy" => "+/-",
        "create" => "+",
        "update" => "~",
        "forget" => ".",
        _ => "?",
    }
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The protected changes of a guard report, one block per resource.
pub fn describe_protected_changes(guard: &Value) -> Vec<String> {
    let Some(changes) = guard.get("protected_changes").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    for change in changes {
        let action = text(change, "action");
        let mut head = format!("  {} {}", marker(action), text(change, "address"));
        let reason = text(change, "reason");
        if !reason.is_empty() {
            head.push_str(&format!(": {reason}"));
        }
        let outcome = text(change, "outcome");
        if !outcome.is_empty() {
            head.push_str(&format!(" [{outcome}]"));
        }
        lines.push(head);
        if let Some(previous) = change.get("previous_address").and_then(Value::as_str) {
            lines.push(format!("      (moved from {previous})"));
        }
        for path in change
            .get("replace_paths")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            lines.push(format!(
                "      {}: {} -> {} (forces replacement)",
                text(path, "path"),
                text(path, "before"),
                text(path, "after")
            ));
        }
        if let Some(drift) = change.get("drift").filter(|drift| !drift.is_null()) {
            if drift.get("deleted").and_then(Value::as_bool) == Some(true) {
                lines.push(
                    "      deleted outside Terraform since the last build: the plan would create a new, empty one"
                        .to_string(),
                );
            }
            for attribute in drift
                .get("attributes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                lines.push(format!(
                    "      changed outside Terraform since the last build: {}: {} -> {}",
                    text(attribute, "path"),
                    text(attribute, "before"),
                    text(attribute, "after")
                ));
            }
        }
        for rule in change
            .get("protected_by")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            lines.push(format!(
                "      protected by {} (mode {})",
                text(rule, "by"),
                text(rule, "mode")
            ));
        }
    }
    lines.iter().map(|line| visible(line)).collect()
}

/// What someone confirming a held build without a digest reads before being
/// asked: the protected changes and the digest of the plan that has them.
pub fn review_message(workspace: &str, build: &Build, digest: &str) -> String {
    let mut lines = vec![format!(
        "Build #{} ({}) of workspace {workspace} is held by the plan guard: it would destroy or replace protected resources:",
        build.number, build.transition
    )];
    match &build.guard {
        Some(guard) => lines.extend(describe_protected_changes(guard)),
        None => lines.push("  (the server sent no guard report for this build)".to_string()),
    }
    lines.push(format!("Plan digest: {digest}"));
    if let Some(at) = build.expires_at.as_deref() {
        lines.push(format!("The plan waits until {} UTC.", time(Some(at))));
    }
    lines
        .iter()
        .map(|line| visible(line))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What to print when a build waits for confirmation: the changes, and the
/// confirm command bound to the digest of the plan that shows them.
pub fn held_message(workspace: &str, build: &Build) -> String {
    let number = build.number;
    let mut lines = vec![format!(
        "The plan guard held build #{number} ({}) of workspace {workspace}: it would destroy or replace protected resources:",
        build.transition
    )];
    if let Some(guard) = &build.guard {
        lines.extend(describe_protected_changes(guard));
    }
    let expiry = build
        .expires_at
        .as_deref()
        .map(|at| format!(" The plan waits until {} UTC.", time(Some(at))))
        .unwrap_or_default();
    lines.push(format!("Nothing was applied.{expiry}"));
    let digest = build
        .plan_digest
        .as_deref()
        .map(|digest| format!(" --digest {digest}"))
        .unwrap_or_default();
    lines.push(format!(
        "To apply exactly this plan: abode builds confirm {workspace} {number}{digest}"
    ));
    lines.push(format!(
        "To discard it:              abode builds cancel {workspace} {number}"
    ));
    lines
        .iter()
        .map(|line| visible(line))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What to print when the guard blocked a build.
pub fn blocked_message(workspace: &str, build: &Build) -> String {
    let mut lines = vec![format!(
        "The plan guard blocked build #{} ({}) of workspace {workspace}: it would destroy or replace resources protected with mode \"block\":",
        build.number, build.transition
    )];
    if let Some(guard) = &build.guard {
        lines.extend(describe_protected_changes(guard));
    }
    lines.push("Nothing was applied. A blocked change cannot be confirmed: fix the template, or have a template-admin release the protection with `abode workspaces unprotect WORKSPACE ADDRESS`.".to_string());
    lines
        .iter()
        .map(|line| visible(line))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn held_build_explains_changes_and_the_way_on() {
        let guard = serde_json::json!({
            "decision": "confirm",
            "protected_changes": [{
                "address": "abode_volume.home",
                "previous_address": null,
                "action": "replace",
                "reason": "replaced because `name` cannot be updated in place",
                "replace_paths": [{"path": "name", "before": "\"home-1\"", "after": "\"home-2\""}],
                "drift": null,
                "protected_by": [{"by": "abode_protect.home on abode_volume.home", "mode": "confirm"}],
                "outcome": "confirm"
            }]
        });
        let build: Build = serde_json::from_value(serde_json::json!({
            "id": "b", "workspace": "dev", "number": 4, "transition": "start",
            "status": "awaiting_confirmation", "template_version": 2, "guard": guard,
            "plan_digest": "9f86d0", "expires_at": "2026-11-30T17:40:00Z"
        }))
        .unwrap();
        let text = held_message("dev", &build);
        let expected = "\
The plan guard held build #4 (start) of workspace dev: it would destroy or replace protected resources:
  -/+ abode_volume.home: replaced because `name` cannot be updated in place [confirm]
      name: \"home-1\" -> \"home-2\" (forces replacement)
      protected by abode_protect.home on abode_volume.home (mode confirm)
Nothing was applied. The plan waits until 2026-11-30 17:40:00 UTC.
To apply exactly this plan: abode builds confirm dev 4 --digest 9f86d0
To discard it:              abode builds cancel dev 4";
        assert_eq!(text, expected);
    }

    #[test]
    fn report_text_from_the_template_is_printed_inert() {
        let guard = serde_json::json!({"protected_changes": [{
            "address": "abode_volume.home\u{1b}[2J",
            "action": "replace",
            "reason": "because\nfake line\r\u{202e}",
            "replace_paths": [{"path": "name", "before": "\"a\u{9b}\"", "after": "\"b\u{7}\""}],
            "protected_by": [{"by": "abode_protect.x", "mode": "confirm\u{1b}]0;t\u{7}"}],
            "outcome": "confirm"
        }]});
        let build: Build = serde_json::from_value(serde_json::json!({
            "id": "b", "workspace": "dev", "number": 4, "transition": "start",
            "status": "awaiting_confirmation", "template_version": 2, "guard": guard,
            "plan_digest": "9f86d0\r", "expires_at": "2026-11-30T17:40:00Z"
        }))
        .unwrap();
        for text in [
            held_message("dev", &build),
            blocked_message("dev", &build),
            review_message("dev", &build, "9f86d0"),
        ] {
            assert!(
                !text
                    .chars()
                    .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
                "{text:?}"
            );
            assert!(text.contains("abode_volume.home\\e[2J"), "{text}");
            assert!(text.contains("because\\nfake line\\r\\u{202e}"), "{text}");
        }
        let review = review_message("dev", &build, "9f86d0");
        assert!(review.contains("\nPlan digest: 9f86d0\n"), "{review}");
        // A transition is one of the wire's names, or the answer is refused.
        let hostile = serde_json::from_value::<Build>(serde_json::json!({
            "id": "b", "workspace": "dev", "number": 4, "transition": "start\u{1b}[1A",
            "status": "awaiting_confirmation", "template_version": 2
        }));
        assert!(hostile.is_err());
    }

    #[test]
    fn drift_deleted_is_explained() {
        let guard = serde_json::json!({"protected_changes": [{
            "address": "abode_volume.home", "action": "create", "reason": "",
            "drift": {"deleted": true, "attributes": []}, "outcome": "confirm"
        }]});
        let lines = describe_protected_changes(&guard);
        assert_eq!(lines[0], "  + abode_volume.home [confirm]");
        assert!(lines[1].contains("deleted outside Terraform"), "{lines:?}");
    }
}
