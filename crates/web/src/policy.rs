//! A template's lifecycle policy on its page (autostop default and limit,
//! activity bump, when failed workspaces stop, dormancy, which autostart
//! days and owner settings it allows), and the form template admins change
//! it with. The API's `template_policy` and `edit_template_policy`
//! (`PATCH /api/v1/templates/{name}/policy`); the form states every field.
//! This is a part of the template's page: it names no page, and the page
//! (`templates.rs`) answers its form.

use axum::http::StatusCode;
use maud::{html, Markup};

use abode_sdk::TemplatePolicy;
use abode_sdk::TemplatePolicyPatch;

use crate::html::{self, path_segment};
use crate::schedule::{duration, parse_duration};
use crate::session::{Viewer, CSRF_FIELD};
use crate::state::WebState;

/// The duration fields: form name, label, what 0 means, and the value.
fn durations(policy: &TemplatePolicy) -> [(&'static str, &'static str, &'static str, u64); 6] {
    [
        (
            "default_ttl",
            "Autostop after inactivity (workspaces' default)",
            "never",
            policy.default_ttl_ms,
        ),
        (
            "activity_bump",
            "Each use pushes the deadline by",
            "off",
            policy.activity_bump_ms,
        ),
        (
            "max_ttl",
            "Longest run, whatever the use",
            "no limit",
            policy.max_ttl_ms,
        ),
        (
            "failure_ttl",
            "Stop a failed workspace after",
            "never",
            policy.failure_ttl_ms,
        ),
        (
            "dormancy_threshold",
            "Dormant after unused for",
            "never",
            policy.dormancy_threshold_ms,
        ),
        (
            "dormancy_auto_deletion",
            "Delete a dormant workspace after",
            "never",
            policy.dormancy_auto_deletion_ms,
        ),
    ]
}

/// The checkbox fields: form name, label, and the value.
fn switches(policy: &TemplatePolicy) -> [(&'static str, &'static str, bool); 3] {
    [
        (
            "allow_user_autostart",
            "Owners may set an autostart schedule",
            policy.allow_user_autostart,
        ),
        (
            "allow_user_autostop",
            "Owners may change autostop",
            policy.allow_user_autostop,
        ),
        (
            "require_active_version",
            "Workspaces start on the active version only",
            policy.require_active_version,
        ),
    ]
}

fn shown(ms: u64, zero: &str) -> String {
    if ms == 0 {
        zero.to_string()
    } else {
        duration(ms)
    }
}

/// The policy's facts, or for those who may change it, its form.
pub(crate) fn section(policy: &TemplatePolicy, csrf: &str, editable: bool) -> Markup {
    html! {
        @if editable {
            form class="card" id="policy" method="post" action=(format!("/templates/{}/policy", path_segment(&policy.template))) aria-label="Change the lifecycle policy" {
                input type="hidden" name=(CSRF_FIELD) value=(csrf);
                @for (name, label, zero, ms) in durations(policy) {
                    label for=(format!("policy-{name}")) { (label) " (e.g. 8h; 0: " (zero) ")" }
                    input id=(format!("policy-{name}")) name=(name) type="text" autocomplete="off"
                        value=(if ms == 0 { "0".to_string() } else { duration(ms) });
                }
                label for="policy-autostart_days" { "Days autostart may run (e.g. mon,tue,wed,thu,fri)" }
                input id="policy-autostart_days" name="autostart_days" type="text" autocomplete="off" value=(policy.autostart_days);
                @for (name, label, on) in switches(policy) {
                    label for=(format!("policy-{name}")) {
                        input id=(format!("policy-{name}")) name=(name) type="checkbox" value="on" checked[on];
                        " " (label)
                    }
                }
                p { button type="submit" { "Save the policy" } }
            }
        } @else {
            dl class="facts" id="policy" {
                @for (_, label, zero, ms) in durations(policy) {
                    dt { (label) } dd { (shown(ms, zero)) }
                }
                dt { "Days autostart may run" } dd { (policy.autostart_days) }
                @for (_, label, on) in switches(policy) {
                    dt { (label) } dd { @if on { "yes" } @else { "no" } }
                }
            }
        }
    }
}

/// The whole policy from the form's fields, or which field is wrong.
fn patch_of(fields: &[(String, String)]) -> Result<TemplatePolicyPatch, String> {
    let field = |name: &str| {
        fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let ms = |name: &str| -> Result<Option<u64>, String> {
        parse_duration(field(name).unwrap_or("")).map_err(|error| format!("{name}: {error}"))
    };
    let on = |name: &str| Some(field(name) == Some("on"));
    Ok(TemplatePolicyPatch {
        default_ttl_ms: ms("default_ttl")?,
        activity_bump_ms: ms("activity_bump")?,
        max_ttl_ms: ms("max_ttl")?,
        autostart_days: field("autostart_days")
            .map(str::trim)
            .filter(|days| !days.is_empty())
            .map(str::to_string),
        allow_user_autostart: on("allow_user_autostart"),
        allow_user_autostop: on("allow_user_autostop"),
        failure_ttl_ms: ms("failure_ttl")?,
        dormancy_threshold_ms: ms("dormancy_threshold")?,
        dormancy_auto_deletion_ms: ms("dormancy_auto_deletion")?,
        require_active_version: on("require_active_version"),
        // Not on this form: `abode templates edit T --allow-sharing`.
        allow_sharing: None,
    })
}

/// Changes the template's policy from the form's fields; the door's refusal
/// (or the form's mistake) with its status. The template's page answers
/// with it (`templates::save_policy`).
pub(crate) async fn save(
    state: &WebState,
    viewer: &Viewer,
    name: &str,
    fields: &[(String, String)],
) -> Result<(), (StatusCode, String)> {
    match patch_of(fields) {
        Ok(patch) => state
            .control
            .schedule_settings()
            .edit_policy(&viewer.caller, name, &patch)
            .await
            .map(|_| ())
            .map_err(|error| (html::status_of(&error), html::message_of(&error))),
        Err(message) => Err((StatusCode::BAD_REQUEST, message)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> TemplatePolicy {
        TemplatePolicy {
            template: "<i>t</i>".into(),
            default_ttl_ms: 8 * 3_600_000,
            activity_bump_ms: 3_600_000,
            max_ttl_ms: 0,
            autostart_days: "mon,tue".into(),
            allow_user_autostart: true,
            allow_user_autostop: false,
            failure_ttl_ms: 0,
            dormancy_threshold_ms: 0,
            dormancy_auto_deletion_ms: 0,
            require_active_version: false,
            allow_sharing: true,
        }
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn the_form_states_the_whole_policy() {
        let patch = patch_of(&pairs(&[
            ("default_ttl", "8h"),
            ("activity_bump", "0"),
            ("max_ttl", "1d"),
            ("failure_ttl", "never"),
            ("dormancy_threshold", "30d"),
            ("dormancy_auto_deletion", ""),
            ("autostart_days", " mon,fri "),
            ("allow_user_autostop", "on"),
        ]))
        .unwrap();
        let hour = 3_600_000;
        assert_eq!(patch.default_ttl_ms, Some(8 * hour));
        assert_eq!(patch.activity_bump_ms, Some(0));
        assert_eq!(patch.max_ttl_ms, Some(24 * hour));
        assert_eq!(patch.failure_ttl_ms, Some(0));
        assert_eq!(patch.dormancy_threshold_ms, Some(30 * 24 * hour));
        assert_eq!(patch.dormancy_auto_deletion_ms, None);
        assert_eq!(patch.autostart_days.as_deref(), Some("mon,fri"));
        // An unchecked box is not sent: the switch is off.
        assert_eq!(patch.allow_user_autostart, Some(false));
        assert_eq!(patch.allow_user_autostop, Some(true));
        assert_eq!(patch.require_active_version, Some(false));
        let refused = patch_of(&pairs(&[("max_ttl", "soon")])).unwrap_err();
        assert!(refused.starts_with("max_ttl: "), "{refused}");
    }

    #[test]
    fn the_form_is_labelled_and_escaped() {
        let form = section(&view(), "tok", true).into_string();
        assert!(
            form.contains("action=\"/templates/%3Ci%3Et%3C%2Fi%3E/policy\""),
            "{form}"
        );
        assert!(form.contains("name=\"csrf\" value=\"tok\""), "{form}");
        for name in [
            "default_ttl",
            "activity_bump",
            "max_ttl",
            "failure_ttl",
            "dormancy_threshold",
            "dormancy_auto_deletion",
            "autostart_days",
            "allow_user_autostart",
            "allow_user_autostop",
            "require_active_version",
        ] {
            assert!(
                form.contains(&format!("label for=\"policy-{name}\"")),
                "{name}: {form}"
            );
            assert!(
                form.contains(&format!("id=\"policy-{name}\"")),
                "{name}: {form}"
            );
        }
        assert!(form.contains("value=\"8h\""), "{form}");
        let facts = section(&view(), "tok", false).into_string();
        assert!(!facts.contains("<form"), "{facts}");
        assert!(facts.contains("no limit"), "{facts}");
    }
}
