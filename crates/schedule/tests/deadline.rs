//! Deadlines, activity bumps, schedule validation and day lists as tables.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use abode_contract::Transition;
use abode_schedule::{
    bump, deadlines_at_start, decide_workspace, validate_schedule, Action, BuildReason,
    BuildStatus, Deadlines, LatestBuild, OwnerStatus, ScheduleError, Settings, StopReason,
    TemplatePolicy, Tick, Weekdays, Workspace,
};
use chrono::{DateTime, Utc};

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

fn hours(n: u64) -> Duration {
    Duration::from_secs(n * 3600)
}

fn policy(default_ttl: Duration, max_ttl: Duration, allow_user_autostop: bool) -> TemplatePolicy {
    TemplatePolicy {
        default_ttl,
        max_ttl,
        allow_user_autostop,
        ..TemplatePolicy::new("tpl")
    }
}

#[test]
fn deadlines_at_a_start() {
    let start = at("2026-06-01T08:00:00Z");
    let deadlines = |deadline: Option<&str>, max: Option<&str>| Deadlines {
        deadline: deadline.map(at),
        max_deadline: max.map(at),
    };
    let z = Duration::ZERO;
    let cases = [
        (
            "no ttl, no max",
            policy(z, z, true),
            None,
            deadlines(None, None),
        ),
        (
            "default ttl",
            policy(hours(8), z, true),
            None,
            deadlines(Some("2026-06-01T16:00:00Z"), None),
        ),
        (
            "the owner's ttl, allowed",
            policy(hours(8), z, true),
            Some(hours(2)),
            deadlines(Some("2026-06-01T10:00:00Z"), None),
        ),
        (
            "the owner's ttl, not allowed",
            policy(hours(8), z, false),
            Some(hours(2)),
            deadlines(Some("2026-06-01T16:00:00Z"), None),
        ),
        (
            "the owner turned autostop off",
            policy(hours(8), z, true),
            Some(z),
            deadlines(None, None),
        ),
        (
            "ttl beyond the max: the max",
            policy(hours(8), hours(4), true),
            None,
            deadlines(Some("2026-06-01T12:00:00Z"), Some("2026-06-01T12:00:00Z")),
        ),
        (
            "ttl within the max",
            policy(hours(2), hours(4), true),
            None,
            deadlines(Some("2026-06-01T10:00:00Z"), Some("2026-06-01T12:00:00Z")),
        ),
        (
            "no ttl but a max: the max always applies",
            policy(z, hours(10), true),
            Some(z),
            deadlines(Some("2026-06-01T18:00:00Z"), Some("2026-06-01T18:00:00Z")),
        ),
    ];
    for (name, policy, ttl, want) in cases {
        assert_eq!(deadlines_at_start(start, &policy, ttl), want, "{name}");
    }
}

#[test]
fn activity_bumps() {
    let deadline = Some("2026-06-01T17:00:00Z");
    let max = Some("2026-06-01T20:00:00Z");
    let cases = [
        (
            "pushed",
            deadline,
            max,
            "2026-06-01T16:30:00Z",
            hours(1),
            Some("2026-06-01T17:30:00Z"),
        ),
        (
            "never earlier",
            deadline,
            max,
            "2026-06-01T15:00:00Z",
            hours(1),
            deadline,
        ),
        (
            "capped by the max",
            deadline,
            max,
            "2026-06-01T19:30:00Z",
            hours(1),
            max,
        ),
        (
            "activity past the max",
            deadline,
            max,
            "2026-06-01T21:00:00Z",
            hours(1),
            max,
        ),
        (
            "no max",
            deadline,
            None,
            "2026-06-01T19:30:00Z",
            hours(1),
            Some("2026-06-01T20:30:00Z"),
        ),
        (
            "no deadline: none made",
            None,
            max,
            "2026-06-01T16:30:00Z",
            hours(1),
            None,
        ),
        (
            "no bump",
            deadline,
            max,
            "2026-06-01T16:30:00Z",
            Duration::ZERO,
            deadline,
        ),
    ];
    for (name, deadline, max, activity, by, want) in cases {
        assert_eq!(
            bump(deadline.map(at), max.map(at), at(activity), by),
            want.map(at),
            "{name}"
        );
    }
}

/// Max ttl against activity, end to end through the decision: a workspace
/// used every 50 minutes is still stopped at its hard deadline.
#[test]
fn max_ttl_beats_activity() {
    let policy = TemplatePolicy {
        default_ttl: hours(1),
        activity_bump: hours(1),
        max_ttl: hours(3),
        ..TemplatePolicy::new("tpl")
    };
    let started = at("2026-06-01T08:00:00Z");
    let mut deadlines = deadlines_at_start(started, &policy, None);
    for activity in ["08:50", "09:40", "10:30"] {
        deadlines.deadline = bump(
            deadlines.deadline,
            deadlines.max_deadline,
            at(&format!("2026-06-01T{activity}:00Z")),
            policy.activity_bump,
        );
    }
    assert_eq!(deadlines.deadline, Some(at("2026-06-01T11:00:00Z")));
    let workspace = Workspace {
        id: "ws".into(),
        template_id: "tpl".into(),
        owner: OwnerStatus::Active,
        prebuilt: false,
        latest_build: Some(LatestBuild {
            transition: Transition::Start,
            status: BuildStatus::Succeeded,
            reason: BuildReason::Initiator,
            blocked: false,
            created_at: started,
            finished_at: Some(started),
        }),
        on_active_version: true,
        autostart: None,
        ttl: None,
        deadline: deadlines.deadline,
        max_deadline: deadlines.max_deadline,
        last_used_at: at("2026-06-01T10:59:00Z"),
        dormancy: None,
    };
    let tick = |now: &str| Tick {
        previous: at(now) - chrono::TimeDelta::minutes(1),
        now: at(now),
        settings: Settings::default(),
    };
    let stop = Action::Stop {
        workspace_id: "ws".into(),
        reason: StopReason::Autostop,
    };
    for (now, want) in [
        ("2026-06-01T10:59:00Z", None),
        ("2026-06-01T11:00:00Z", Some(stop)),
    ] {
        assert_eq!(
            decide_workspace(&workspace, &policy, &tick(now)),
            Ok(want),
            "{now}"
        );
    }
}

#[test]
fn schedule_validation() {
    let fields = |cron: &str, fields| {
        Err(ScheduleError::Fields {
            cron: cron.into(),
            fields,
        })
    };
    let cases: Vec<(&str, &str, Result<(), ScheduleError>)> = vec![
        ("0 9 * * 1-5", "UTC", Ok(())),
        ("*/15 8-18 * * mon-fri", "Europe/Paris", Ok(())),
        ("30 2 * * *", "America/New_York", Ok(())),
        ("0 9 1,15 * *", "Asia/Tokyo", Ok(())),
        ("0 9 * * 7", "UTC", Ok(())),
        ("0 9 * *", "UTC", fields("0 9 * *", 4)),
        ("0 0 9 * * *", "UTC", fields("0 0 9 * * *", 6)),
        ("@daily", "UTC", fields("@daily", 1)),
        ("", "UTC", fields("", 0)),
        (
            "0 9 * * 1-5",
            "Mars/Olympus",
            Err(ScheduleError::Timezone("Mars/Olympus".into())),
        ),
        (
            "60 9 * * *",
            "UTC",
            Err(ScheduleError::Cron {
                cron: "60 9 * * *".into(),
                reason: "the minute field `60` is not valid (0-59)".into(),
            }),
        ),
        (
            "0 9 * 13 *",
            "UTC",
            Err(ScheduleError::Cron {
                cron: "0 9 * 13 *".into(),
                reason: "the month field `13` is not valid (1-12 or jan-dec)".into(),
            }),
        ),
        ("0 9 29 2 *", "UTC", Ok(())),
        (
            "0 9 31 2 *",
            "UTC",
            Err(ScheduleError::Never("0 9 31 2 *".into())),
        ),
        (
            "0 9 * * funday",
            "UTC",
            Err(ScheduleError::Cron {
                cron: "0 9 * * funday".into(),
                reason: "the day-of-week field `funday` is not valid (0-7 or sun-sat)".into(),
            }),
        ),
    ];
    for (cron, zone, want) in cases {
        let got = validate_schedule(cron, zone);
        assert_eq!(got, want, "{cron} in {zone}");
        if let Err(error) = got {
            assert!(!error.to_string().contains('\n'), "{error}");
        }
    }
    assert_eq!(
        validate_schedule("60 9 * * *", "UTC")
            .unwrap_err()
            .to_string(),
        "cron `60 9 * * *`: the minute field `60` is not valid (0-59)"
    );
    assert_eq!(
        validate_schedule("0 9 31 2 *", "UTC")
            .unwrap_err()
            .to_string(),
        "cron `0 9 31 2 *` never fires"
    );
    assert_eq!(
        fields("0 9 * *", 4).unwrap_err().to_string(),
        "cron `0 9 * *` has 4 fields; expected 5: minute hour day-of-month month day-of-week"
    );
}

#[test]
fn weekday_lists() {
    use chrono::Weekday::*;
    let cases = [
        (
            "mon,tue,wed,thu,fri",
            Ok(Weekdays::of(&[Mon, Tue, Wed, Thu, Fri])),
        ),
        ("Sat, sunday", Ok(Weekdays::of(&[Sat, Sun]))),
        ("", Ok(Weekdays::NONE)),
        ("mon,funday", Err("funday")),
    ];
    for (text, want) in cases {
        let got = Weekdays::parse(text).map_err(|error| error.0);
        assert_eq!(got, want.map_err(String::from), "{text}");
    }
    assert_eq!(Weekdays::of(&[Sun, Mon]).to_string(), "mon,sun");
    assert_eq!(Weekdays::ALL.to_string(), "mon,tue,wed,thu,fri,sat,sun");
}

/// Durations beyond the calendar's range (a typo in a flag) saturate
/// instead of panicking: the rule is then never due.
#[test]
fn huge_durations_never_panic() {
    let huge = Duration::MAX;
    let policy = TemplatePolicy {
        default_ttl: huge,
        activity_bump: huge,
        max_ttl: huge,
        failure_ttl: huge,
        dormancy_threshold: huge,
        dormancy_auto_deletion: huge,
        ..TemplatePolicy::new("tpl")
    };
    let now = at("2026-06-01T08:00:00Z");
    let deadlines = deadlines_at_start(now, &policy, Some(huge));
    assert_eq!(deadlines.deadline, Some(DateTime::<Utc>::MAX_UTC));
    assert_eq!(
        bump(deadlines.deadline, deadlines.max_deadline, now, huge),
        Some(DateTime::<Utc>::MAX_UTC)
    );
    let mut workspace = Workspace {
        id: "ws".into(),
        template_id: "tpl".into(),
        owner: OwnerStatus::Active,
        prebuilt: false,
        latest_build: Some(LatestBuild {
            transition: Transition::Delete,
            status: BuildStatus::Failed,
            reason: BuildReason::Autodelete,
            blocked: false,
            created_at: now,
            finished_at: Some(now),
        }),
        on_active_version: true,
        autostart: None,
        ttl: None,
        deadline: deadlines.deadline,
        max_deadline: deadlines.max_deadline,
        last_used_at: now,
        dormancy: Some(abode_schedule::Dormancy {
            dormant_at: now,
            deleting_at: Some(now),
            deletion_notified_at: Some(now),
        }),
    };
    let tick = Tick {
        previous: now,
        now,
        settings: Settings {
            deletion_notice: huge,
            deletion_retry: huge,
        },
    };
    assert_eq!(decide_workspace(&workspace, &policy, &tick), Ok(None));
    workspace.dormancy = None;
    assert_eq!(decide_workspace(&workspace, &policy, &tick), Ok(None));
}
