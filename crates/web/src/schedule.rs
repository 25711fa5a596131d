//! A workspace's schedule on its page: what the scheduler will do (autostart
//! cron, autostop after inactivity, the current deadline), the form that
//! sets it, and extending the deadline or waking a dormant workspace. The
//! API's `workspace_schedule`, `set_workspace_schedule` (`PUT
//! /api/v1/workspaces/{ws}/schedule`: the whole schedule at once),
//! `extend_workspace` and `wake_workspace`, so the template's policy and the
//! owner's right are the door's. This is a part of the workspace's page: it
//! names no page, and the page (`workspaces.rs`) answers its forms.

use std::time::Duration;

use axum::http::StatusCode;
use maud::{html, Markup};
use serde::Deserialize;

use abode_sdk::{Autostart, ScheduleSpec, WorkspaceSchedule};

use crate::html::{self, time};
use crate::session::{Viewer, CSRF_FIELD};
use crate::state::WebState;

/// Milliseconds as a short duration (`8h`, `90m` as `1h30m`, `2d`, `45s`),
/// to the second: what the form shows reads back as the same value (a ttl
/// set through the API to the millisecond is the only loss).
pub(crate) fn duration(ms: u64) -> String {
    let seconds = ms / 1000;
    let parts = [
        (seconds / 86_400, "d"),
        (seconds / 3600 % 24, "h"),
        (seconds / 60 % 60, "m"),
        (seconds % 60, "s"),
    ];
    let mut text = String::new();
    for (value, unit) in parts {
        if value > 0 {
            text.push_str(&format!("{value}{unit}"));
        }
    }
    if text.is_empty() {
        "0s".to_string()
    } else {
        text
    }
}

/// A duration field of the dashboard's forms: empty is "not given"
/// (`None`: the template's default, or unchanged), `0`, `never` or `off` is
/// 0 (no autostop, a rule turned off), otherwise days, hours, minutes and
/// seconds (`8h`, `90m`, `1h30m`, `2d`, `45s`), in milliseconds.
pub(crate) fn parse_duration(text: &str) -> Result<Option<u64>, String> {
    let text = text.trim().to_ascii_lowercase();
    if text.is_empty() {
        return Ok(None);
    }
    if text == "0" || text == "never" || text == "off" {
        return Ok(Some(0));
    }
    let refused = || {
        format!(
            "expected a duration such as 8h, 90m or 1h30m, or 0 for never (not \"{}\")",
            text.chars().take(32).collect::<String>()
        )
    };
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit_ms: u64 = match c {
            'd' => 86_400_000,
            'h' => 3_600_000,
            'm' => 60_000,
            's' => 1000,
            _ => return Err(refused()),
        };
        let value: u64 = digits.parse().map_err(|_| refused())?;
        total = total.saturating_add(value.saturating_mul(unit_ms));
        digits.clear();
    }
    if !digits.is_empty() || total == 0 {
        return Err(refused());
    }
    Ok(Some(total))
}

/// The schedule's facts and, for whoever may change it, its form. `problem`
/// is the door's refusal of the last change.
pub(crate) fn section(
    schedule: &WorkspaceSchedule,
    url: &str,
    csrf: &str,
    editable: bool,
    problem: Option<&str>,
) -> Markup {
    let cron = schedule.autostart.as_ref().map_or("", |a| a.cron.as_str());
    let timezone = schedule
        .autostart
        .as_ref()
        .map_or("UTC", |a| a.timezone.as_str());
    let ttl = match schedule.ttl_ms {
        None => String::new(),
        Some(0) => "0".to_string(),
        Some(ms) => duration(ms),
    };
    let default_ttl = match schedule.template_default_ttl_ms {
        0 => "never".to_string(),
        ms => duration(ms),
    };
    html! {
        dl class="facts" id="schedule" {
            dt { "Autostart" }
            dd { @match &schedule.autostart {
                Some(autostart) => { span class="mono" { (autostart.cron) } " (" (autostart.timezone) ")" }
                None => { "off" }
            } }
            dt { "Autostop after" }
            dd { @match schedule.ttl_ms {
                Some(0) => { "never" }
                Some(ms) => { (duration(ms)) " without use" }
                None => { "the template's default: " (default_ttl) }
            } }
            @if schedule.template_max_ttl_ms > 0 {
                dt { "Longest run" } dd { (duration(schedule.template_max_ttl_ms)) " (the template's limit)" }
            }
            @if let Some(deadline) = schedule.deadline {
                dt { "Stops at" } dd { (time(deadline)) }
            }
            @if let Some(dormant) = schedule.dormant_at {
                dt { "Dormant since" } dd { (time(dormant)) }
            }
            @if let Some(deleting) = schedule.deleting_at {
                dt { "Deleted at" } dd { (time(deleting)) }
            }
        }
        @if let Some(problem) = problem {
            p class="error" role="alert" { (problem) }
        }
        @if editable {
            form class="card" method="post" action=(format!("{url}/schedule")) aria-label="Change the schedule" {
                input type="hidden" name=(CSRF_FIELD) value=(csrf);
                label for="schedule-cron" { "Autostart (cron: minute hour day month weekday; empty: off)" }
                input id="schedule-cron" class="mono" name="cron" type="text" value=(cron)
                    placeholder="0 8 * * 1-5" autocomplete="off" readonly[!schedule.allow_user_autostart];
                label for="schedule-timezone" { "Time zone (IANA, e.g. Europe/Paris)" }
                input id="schedule-timezone" name="timezone" type="text" value=(timezone)
                    autocomplete="off" readonly[!schedule.allow_user_autostart];
                @if !schedule.allow_user_autostart {
                    p class="muted" { "The template does not let owners set an autostart schedule." }
                } @else if schedule.autostart_days != "mon,tue,wed,thu,fri,sat,sun" {
                    p class="muted" { "The template allows autostart on " (schedule.autostart_days) " only." }
                }
                label for="schedule-ttl" { "Autostop after (e.g. 8h, 90m; 0: never; empty: the template's default, " (default_ttl) ")" }
                input id="schedule-ttl" name="ttl" type="text" value=(ttl)
                    autocomplete="off" readonly[!schedule.allow_user_autostop];
                @if !schedule.allow_user_autostop {
                    p class="muted" { "The template does not let owners change autostop." }
                }
                p { button type="submit" { "Save the schedule" } }
            }
            @if schedule.deadline.is_some() {
                form class="card" method="post" action=(format!("{url}/extend")) aria-label="Extend the deadline" {
                    input type="hidden" name=(CSRF_FIELD) value=(csrf);
                    label for="extend-by" { "Keep it running for (from now, e.g. 2h)" }
                    input id="extend-by" name="by" type="text" value="1h" autocomplete="off";
                    " "
                    button type="submit" { "Extend" }
                }
            }
            @if schedule.dormant_at.is_some() {
                form method="post" action=(format!("{url}/wake")) {
                    input type="hidden" name=(CSRF_FIELD) value=(csrf);
                    button type="submit" { "Wake: no longer dormant" }
                }
            }
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct ScheduleForm {
    #[serde(default)]
    cron: String,
    #[serde(default)]
    timezone: String,
    #[serde(default)]
    ttl: String,
}

/// The whole schedule from the form, or why it is not one.
fn spec_of(form: &ScheduleForm) -> Result<ScheduleSpec, String> {
    let cron = form.cron.trim();
    let timezone = form.timezone.trim();
    let autostart = (!cron.is_empty()).then(|| Autostart {
        cron: cron.to_string(),
        timezone: if timezone.is_empty() { "UTC" } else { timezone }.to_string(),
    });
    Ok(ScheduleSpec {
        autostart,
        ttl_ms: parse_duration(&form.ttl).map_err(|error| format!("autostop: {error}"))?,
    })
}

/// What a change of the schedule comes to: done, or the door's refusal (or
/// the form's mistake) with its status.
pub(crate) type Outcome = Result<(), (StatusCode, String)>;

/// Sets the whole schedule of workspace `reference` (`OWNER/NAME`) from the
/// form. The workspace's page answers with the outcome
/// (`workspaces::save_schedule`).
pub(crate) async fn save(
    state: &WebState,
    viewer: &Viewer,
    reference: &str,
    form: &ScheduleForm,
) -> Outcome {
    match spec_of(form) {
        Ok(spec) => state
            .control
            .schedule_settings()
            .set_schedule(&viewer.caller, reference, &spec)
            .await
            .map(|_| ())
            .map_err(|error| (html::status_of(&error), html::message_of(&error))),
        Err(message) => Err((StatusCode::BAD_REQUEST, message)),
    }
}

#[derive(Deserialize)]
pub(crate) struct ExtendForm {
    #[serde(default)]
    by: String,
}

/// Extends a running workspace's deadline (`ScheduleSettings::extend`, as
/// `POST /api/v1/workspaces/{ws}/extend`).
pub(crate) async fn extend(
    state: &WebState,
    viewer: &Viewer,
    reference: &str,
    form: &ExtendForm,
) -> Outcome {
    match parse_duration(&form.by) {
        Ok(Some(ms)) if ms > 0 => state
            .control
            .schedule_settings()
            .extend(&viewer.caller, reference, Duration::from_millis(ms))
            .await
            .map(|_| ())
            .map_err(|error| (html::status_of(&error), html::message_of(&error))),
        _ => Err((
            StatusCode::BAD_REQUEST,
            "extend by a duration such as 2h or 30m".to_string(),
        )),
    }
}

/// Wakes a dormant workspace (`ScheduleSettings::wake`, as
/// `POST /api/v1/workspaces/{ws}/wake`).
pub(crate) async fn wake(state: &WebState, viewer: &Viewer, reference: &str) -> Outcome {
    state
        .control
        .schedule_settings()
        .wake(&viewer.caller, reference)
        .await
        .map(|_| ())
        .map_err(|error| (html::status_of(&error), html::message_of(&error)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autostop_reads_as_people_write_it() {
        let hour = 3_600_000;
        let cases: [(&str, Result<Option<u64>, ()>); 13] = [
            ("", Ok(None)),
            ("1m30s", Ok(Some(90_000))),
            ("  ", Ok(None)),
            ("0", Ok(Some(0))),
            ("never", Ok(Some(0))),
            ("8h", Ok(Some(8 * hour))),
            ("90m", Ok(Some(90 * 60_000))),
            ("1h30m", Ok(Some(hour + 30 * 60_000))),
            ("2D", Ok(Some(48 * hour))),
            ("8", Err(())),
            ("h", Err(())),
            ("0h", Err(())),
            ("8 hours", Err(())),
        ];
        for (given, expected) in cases {
            assert_eq!(parse_duration(given).map_err(|_| ()), expected, "{given:?}");
        }
    }

    #[test]
    fn durations_read_back_as_they_are_written() {
        for ms in [
            1000,
            60_000,
            90 * 60_000,
            8 * 3_600_000,
            86_400_000 + 3_600_000,
            3_600_000 + 45_000,
        ] {
            assert_eq!(parse_duration(&duration(ms)), Ok(Some(ms)), "{ms}");
        }
        assert_eq!(duration(8 * 3_600_000), "8h");
        assert_eq!(duration(90 * 60_000), "1h30m");
    }

    fn view(allow: bool) -> WorkspaceSchedule {
        WorkspaceSchedule {
            workspace: "alice/dev".into(),
            autostart: Some(Autostart {
                cron: "0 8 * * 1-5".into(),
                timezone: "<b>Zone</b>".into(),
            }),
            ttl_ms: None,
            allow_user_autostart: allow,
            allow_user_autostop: true,
            template_default_ttl_ms: 8 * 3_600_000,
            template_max_ttl_ms: 0,
            autostart_days: "mon,tue,wed,thu,fri,sat,sun".into(),
            deadline: None,
            max_deadline: None,
            last_used_at: None,
            dormant_at: None,
            deleting_at: None,
        }
    }

    #[test]
    fn the_form_is_labelled_escaped_and_follows_the_policy() {
        let open = section(
            &view(true),
            "/workspaces/alice/dev",
            "tok",
            true,
            Some("<i>no</i>"),
        )
        .into_string();
        for expected in [
            "name=\"csrf\" value=\"tok\"",
            "label for=\"schedule-cron\"",
            "label for=\"schedule-timezone\"",
            "label for=\"schedule-ttl\"",
            "action=\"/workspaces/alice/dev/schedule\"",
            "&lt;b&gt;Zone&lt;/b&gt;",
            "&lt;i&gt;no&lt;/i&gt;",
            "the template's default: 8h",
        ] {
            assert!(open.contains(expected), "{expected} not in {open}");
        }
        assert!(!open.contains("<b>Zone"), "{open}");
        assert!(!open.contains("readonly"), "{open}");
        let locked = section(&view(false), "/w", "tok", true, None).into_string();
        assert!(
            locked.contains("does not let owners set an autostart"),
            "{locked}"
        );
        assert_eq!(locked.matches("readonly").count(), 2, "{locked}");
        assert!(!open.contains("/extend"), "{open}");
        assert!(!open.contains("/wake"), "{open}");
        let mut running = view(true);
        running.deadline = Some(1_800_000_000_000);
        running.dormant_at = Some(1_700_000_000_000);
        let running = section(&running, "/w", "tok", true, None).into_string();
        for expected in [
            "action=\"/w/extend\"",
            "label for=\"extend-by\"",
            "id=\"extend-by\"",
            "action=\"/w/wake\"",
            "Stops at",
            "Dormant since",
        ] {
            assert!(running.contains(expected), "{expected} not in {running}");
        }
        let read_only = section(&view(true), "/w", "tok", false, None).into_string();
        assert!(!read_only.contains("<form"), "{read_only}");
    }

    #[test]
    fn an_empty_cron_turns_autostart_off() {
        let form = |cron: &str, timezone: &str, ttl: &str| ScheduleForm {
            cron: cron.into(),
            timezone: timezone.into(),
            ttl: ttl.into(),
        };
        let off = spec_of(&form(" ", "Europe/Paris", "")).unwrap();
        assert_eq!(off.autostart, None);
        assert_eq!(off.ttl_ms, None);
        let on = spec_of(&form("0 8 * * 1-5", "", "8h")).unwrap();
        assert_eq!(
            on.autostart,
            Some(Autostart {
                cron: "0 8 * * 1-5".into(),
                timezone: "UTC".into()
            })
        );
        assert_eq!(on.ttl_ms, Some(8 * 3_600_000));
        assert!(spec_of(&form("", "", "soon")).is_err());
    }
}
