//! The guard's report (JSON schema 1, docs/plan-check.md) as a page section.
//!
//! The stored report is already redacted by the guard: sensitive values are
//! `(sensitive value)` there, so what is shown here is what the CLI and the
//! API show. It is read as JSON values rather than the guard's types so that
//! fields added within schema 1 never break the page.

use maud::{html, Markup};
use serde_json::Value;

use crate::html::badge;

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn list<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// What happens to a resource, in words.
fn action_words(action: &str, drift_deleted: bool) -> &'static str {
    match action {
        _ if drift_deleted => "re-created empty: it was deleted outside Terraform",
        "replace" => "replaced: destroyed, then created again empty",
        "replace_create_before_destroy" => {
            "replaced: a new one is created, then the old one destroyed"
        }
        "delete" => "deleted",
        "forget" => "forgotten by Terraform (left in place)",
        "update" => "updated in place",
        "create" => "created",
        _ => "changed",
    }
}

/// What happens to a resource nobody protects, in a word or two.
fn short_action_words(action: &str) -> &'static str {
    match action {
        "replace" => "replaced",
        "replace_create_before_destroy" => "replaced (the new one created first)",
        "delete" => "deleted",
        "forget" => "forgotten by Terraform",
        _ => "destroyed",
    }
}

/// The decision of a report, `None` when it has none.
pub(crate) fn decision(report: &Value) -> Option<&str> {
    report.get("decision").and_then(Value::as_str)
}

/// The report: each protected change with its reason, forcing attributes
/// (before and after), drift and rules; the other destroyed resources; the
/// guard's warnings.
pub(crate) fn render(report: &Value) -> Markup {
    let changes = list(report, "protected_changes");
    let others = list(report, "unprotected_destroys");
    let warnings = list(report, "warnings");
    html! {
        section aria-labelledby="report-title" {
            h2 id="report-title" { "What this plan does to protected resources" }
            dl class="facts" {
                dt { "Decision" } dd { (badge(text(report, "decision"))) }
                dt { "Transition" } dd { (text(report, "transition")) }
                @if text(report, "initiator") == "system" {
                    dt { "Started by" } dd { "the system (not a person)" }
                }
                @if let Some(version) = report.get("terraform_version").and_then(Value::as_str) {
                    dt { "Terraform" } dd { (version) }
                }
            }
            @if changes.is_empty() {
                p { "No protected resource is destroyed or replaced." }
            }
            @for change in changes {
                (protected_change(change))
            }
            h2 { "Other resources destroyed" }
            @if others.is_empty() {
                p class="muted" { "None." }
            } @else {
                ul {
                    @for other in others {
                        li {
                            span class="mono" { (text(other, "address")) }
                            " — " (short_action_words(text(other, "action")))
                            @if !text(other, "reason").is_empty() {
                                ": " (text(other, "reason"))
                            }
                        }
                    }
                }
            }
            @if !warnings.is_empty() {
                h2 { "Warnings" }
                ul {
                    @for warning in warnings {
                        li { (warning.as_str().map(str::to_string).unwrap_or_else(|| warning.to_string())) }
                    }
                }
            }
        }
    }
}

pub(crate) fn protected_change(change: &Value) -> Markup {
    let drift = change.get("drift").filter(|drift| !drift.is_null());
    let drift_deleted = drift
        .and_then(|drift| drift.get("deleted"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let paths = list(change, "replace_paths");
    let rules = list(change, "protected_by");
    html! {
        article class="change" {
            h3 { (text(change, "address")) }
            p {
                strong { (action_words(text(change, "action"), drift_deleted)) }
                " · outcome: " (badge(text(change, "outcome")))
            }
            @if !text(change, "reason").is_empty() {
                p { "Why: " (text(change, "reason")) }
            }
            @if let Some(previous) = change.get("previous_address").and_then(Value::as_str) {
                p { "Previously " span class="mono" { (previous) } }
            }
            @if !paths.is_empty() {
                table {
                    caption { "Attributes that force the replacement" }
                    thead { tr { th scope="col" { "Attribute" } th scope="col" { "Before" } th scope="col" { "After" } } }
                    tbody {
                        @for path in paths {
                            tr {
                                td class="mono" { (text(path, "path")) }
                                td class="mono" { (text(path, "before")) }
                                td class="mono" { (text(path, "after")) }
                            }
                        }
                    }
                }
            }
            @if let Some(drift) = drift {
                p { "Changed outside Terraform since the last apply:" }
                @if drift_deleted {
                    p { "the resource itself was deleted." }
                }
                ul {
                    @for attribute in list(drift, "attributes") {
                        li {
                            span class="mono" { (text(attribute, "path")) } ": "
                            span class="mono" { (text(attribute, "before")) } " → "
                            span class="mono" { (text(attribute, "after")) }
                        }
                    }
                }
            }
            @if !rules.is_empty() {
                p { "Protected by:" }
                ul {
                    @for rule in rules {
                        li { span class="mono" { (text(rule, "by")) } " (mode " (text(rule, "mode")) ")" }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_shows_paths_rules_and_escapes_values() {
        let report = serde_json::json!({
            "schema_version": 1, "decision": "confirm", "transition": "start",
            "protected_changes": [{
                "address": "abode_volume.home", "action": "replace",
                "reason": "replaced because `name` cannot be updated in place",
                "replace_paths": [{"path": "name", "before": "\"<b>home-1</b>\"", "after": "(sensitive value)"}],
                "drift": null,
                "protected_by": [{"by": "abode_protect.home on abode_volume.home", "mode": "confirm"}],
                "outcome": "confirm"
            }],
            "unprotected_destroys": [{"address": "abode_process.main[0]", "action": "delete", "reason": "deleted because count index [0] no longer exists"}],
            "warnings": []
        });
        let page = render(&report).into_string();
        for expected in [
            "abode_volume.home",
            "replaced because `name` cannot be updated in place",
            "&lt;b&gt;home-1&lt;/b&gt;",
            "(sensitive value)",
            "abode_protect.home on abode_volume.home",
            "abode_process.main[0]",
            "replaced: destroyed, then created again empty",
        ] {
            assert!(page.contains(expected), "{expected} missing from {page}");
        }
        assert!(!page.contains("<b>home-1"));
    }

    #[test]
    fn a_resource_deleted_outside_terraform_reads_as_re_created() {
        let change = serde_json::json!({
            "address": "abode_volume.home", "action": "create", "outcome": "confirm",
            "drift": {"deleted": true, "attributes": []}
        });
        let page = protected_change(&change).into_string();
        assert!(page.contains("re-created empty"), "{page}");
    }
}
