//! The scheduler's rules as a table: each case spells out one workspace, its
//! template's policy, the tick, and the exact action (or problem) expected.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use abode_contract::Transition;
use abode_schedule::{
    decide, decide_with, Action, AutostartSchedule, BuildReason, BuildStatus, Decision, Dormancy,
    LatestBuild, OwnerStatus, Problem, ScheduleCache, Settings, Snapshot, StopReason,
    TemplatePolicy, Tick, Weekdays, Workspace,
};
use chrono::{DateTime, Utc, Weekday};

// ---- building facts -------------------------------------------------------

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

fn hours(n: u64) -> Duration {
    Duration::from_secs(n * 3600)
}

fn days(n: u64) -> Duration {
    hours(24 * n)
}

/// A build that ended (or, in progress, was created) at `when`.
fn build(
    transition: Transition,
    status: BuildStatus,
    reason: BuildReason,
    when: &str,
) -> LatestBuild {
    let when = at(when);
    let ended = !matches!(
        status,
        BuildStatus::Pending | BuildStatus::Running | BuildStatus::AwaitingConfirmation
    );
    LatestBuild {
        transition,
        status,
        reason,
        blocked: false,
        created_at: when,
        finished_at: ended.then_some(when),
    }
}

fn blocked(mut build: LatestBuild) -> LatestBuild {
    build.blocked = true;
    build.status = BuildStatus::Failed;
    build
}

use BuildReason::{Autodelete, Autostart, Autostop, Initiator};
use BuildStatus::{AwaitingConfirmation, Canceled, Failed, Pending, Succeeded};
use Transition::{Delete, Start, Stop};

/// A workspace of template `tpl` whose latest build is `latest`, used at
/// 2026-06-01 08:00 UTC (a Monday), with no schedule, deadline or dormancy.
fn ws(latest: LatestBuild) -> Workspace {
    Workspace {
        id: "ws".into(),
        template_id: "tpl".into(),
        owner: OwnerStatus::Active,
        prebuilt: false,
        latest_build: Some(latest),
        on_active_version: true,
        autostart: None,
        ttl: None,
        deadline: None,
        max_deadline: None,
        last_used_at: at("2026-06-01T08:00:00Z"),
        dormancy: None,
    }
}

/// Started by its owner at 2026-06-01 08:00 UTC.
fn running() -> Workspace {
    ws(build(Start, Succeeded, Initiator, "2026-06-01T08:00:00Z"))
}

/// Stopped by its owner the evening before.
fn stopped() -> Workspace {
    ws(build(Stop, Succeeded, Initiator, "2026-05-31T18:00:00Z"))
}

fn with_deadline(mut w: Workspace, deadline: Option<&str>, max: Option<&str>) -> Workspace {
    w.deadline = deadline.map(at);
    w.max_deadline = max.map(at);
    w
}

fn with_schedule(mut w: Workspace, cron: &str, timezone: &str) -> Workspace {
    w.autostart = Some(AutostartSchedule {
        cron: cron.into(),
        timezone: timezone.into(),
    });
    w
}

fn suspended(mut w: Workspace) -> Workspace {
    w.owner = OwnerStatus::Suspended;
    w
}

fn prebuilt(mut w: Workspace) -> Workspace {
    w.prebuilt = true;
    w
}

fn outdated(mut w: Workspace) -> Workspace {
    w.on_active_version = false;
    w
}

fn last_used(mut w: Workspace, when: &str) -> Workspace {
    w.last_used_at = at(when);
    w
}

fn dormant(
    mut w: Workspace,
    since: &str,
    deleting_at: Option<&str>,
    notified_at: Option<&str>,
) -> Workspace {
    w.dormancy = Some(Dormancy {
        dormant_at: at(since),
        deleting_at: deleting_at.map(at),
        deletion_notified_at: notified_at.map(at),
    });
    w
}

/// The policy of a new template: no autostop, every day, owners' schedules.
fn policy() -> TemplatePolicy {
    TemplatePolicy::new("tpl")
}

fn weekdays_only() -> TemplatePolicy {
    TemplatePolicy {
        autostart_days: Weekdays::parse("mon,tue,wed,thu,fri").unwrap(),
        ..policy()
    }
}

fn failure_ttl(ttl: Duration) -> TemplatePolicy {
    TemplatePolicy {
        failure_ttl: ttl,
        ..policy()
    }
}

/// Dormant after 30 days unused, deleted 14 days after.
fn dormancy() -> TemplatePolicy {
    TemplatePolicy {
        dormancy_threshold: days(30),
        dormancy_auto_deletion: days(14),
        ..policy()
    }
}

// ---- expected values -------------------------------------------------------

fn stop(reason: StopReason) -> Expect {
    Expect::Action(Action::Stop {
        workspace_id: "ws".into(),
        reason,
    })
}
fn autostop() -> Expect {
    stop(StopReason::Autostop)
}
fn failure_stop() -> Expect {
    stop(StopReason::FailureTtl)
}
fn start(update: bool) -> Expect {
    Expect::Action(Action::Start {
        workspace_id: "ws".into(),
        update,
    })
}
fn mark_dormant(stop_too: bool, delete_at: Option<&str>) -> Expect {
    Expect::Action(Action::MarkDormant {
        workspace_id: "ws".into(),
        stop_too,
        delete_at: delete_at.map(at),
    })
}
fn notify(when: &str) -> Expect {
    Expect::Action(Action::NotifyDeletionScheduled {
        workspace_id: "ws".into(),
        at: at(when),
    })
}
fn delete() -> Expect {
    Expect::Action(Action::Delete {
        workspace_id: "ws".into(),
    })
}

#[derive(Debug)]
enum Expect {
    Nothing,
    Action(Action),
    Problem(&'static str),
}
use Expect::Nothing;

// ---- the table ---------------------------------------------------------------

struct Case {
    name: &'static str,
    workspace: Workspace,
    policy: TemplatePolicy,
    /// The previous tick and this one.
    window: Window,
    expect: Expect,
}

fn case(
    name: &'static str,
    workspace: Workspace,
    policy: TemplatePolicy,
    window: Window,
    expect: Expect,
) -> Case {
    Case {
        name,
        workspace,
        policy,
        window,
        expect,
    }
}

fn check(cases: Vec<Case>, settings: Settings) {
    let mut failures = Vec::new();
    for case in cases {
        let tick = Tick {
            previous: case.window.0,
            now: case.window.1,
            settings,
        };
        let snapshot = Snapshot {
            templates: vec![case.policy],
            workspaces: vec![case.workspace],
        };
        let got = decide(&snapshot, &tick);
        let want = match &case.expect {
            Expect::Nothing => Decision::default(),
            Expect::Action(action) => Decision {
                actions: vec![action.clone()],
                problems: vec![],
            },
            Expect::Problem(message) => Decision {
                actions: vec![],
                problems: vec![Problem {
                    workspace_id: "ws".into(),
                    message: message.to_string(),
                }],
            },
        };
        if got != want {
            failures.push(format!(
                "{}:\n  want {:?}\n  got  {:?}",
                case.name, want, got
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A one-minute tick ending at `now`.
fn minute(now: &str) -> Window {
    (at(now) - chrono::TimeDelta::minutes(1), at(now))
}

/// A tick after an `previous` one.
fn span(previous: &str, now: &str) -> Window {
    (at(previous), at(now))
}

type Window = (DateTime<Utc>, DateTime<Utc>);

#[test]
fn autostop_rules() {
    let now = "2026-06-01T17:00:00Z";
    check(
        vec![
            case(
                "deadline passed",
                with_deadline(running(), Some("2026-06-01T16:59:00Z"), None),
                policy(),
                minute(now),
                autostop(),
            ),
            case(
                "deadline exactly now",
                with_deadline(running(), Some(now), None),
                policy(),
                minute(now),
                autostop(),
            ),
            case(
                "deadline ahead",
                with_deadline(running(), Some("2026-06-01T17:01:00Z"), None),
                policy(),
                minute(now),
                Nothing,
            ),
            case("no deadline", running(), policy(), minute(now), Nothing),
            case(
                "only a hard deadline, passed",
                with_deadline(running(), None, Some("2026-06-01T16:00:00Z")),
                policy(),
                minute(now),
                autostop(),
            ),
            case(
                "deadline bumped past the hard deadline: the hard one wins",
                with_deadline(
                    running(),
                    Some("2026-06-01T18:00:00Z"),
                    Some("2026-06-01T17:00:00Z"),
                ),
                policy(),
                minute(now),
                autostop(),
            ),
            case(
                "suspended owner: still stopped",
                suspended(with_deadline(running(), Some("2026-06-01T16:00:00Z"), None)),
                policy(),
                minute(now),
                autostop(),
            ),
            case(
                "already stopped",
                with_deadline(stopped(), Some("2026-06-01T16:00:00Z"), None),
                policy(),
                minute(now),
                Nothing,
            ),
            case(
                "a stop in progress",
                with_deadline(
                    ws(build(Stop, Pending, Initiator, "2026-06-01T16:59:30Z")),
                    Some("2026-06-01T16:00:00Z"),
                    None,
                ),
                policy(),
                minute(now),
                Nothing,
            ),
            case(
                "the previous autostop is held",
                with_deadline(
                    ws(build(
                        Stop,
                        AwaitingConfirmation,
                        Autostop,
                        "2026-06-01T16:00:00Z",
                    )),
                    Some("2026-06-01T16:00:00Z"),
                    None,
                ),
                policy(),
                minute(now),
                Nothing,
            ),
            case(
                "the previous autostop failed: not retried",
                with_deadline(
                    ws(build(Stop, Failed, Autostop, "2026-06-01T16:00:00Z")),
                    Some("2026-06-01T16:00:00Z"),
                    None,
                ),
                policy(),
                minute(now),
                Nothing,
            ),
            case(
                "the previous autostop was held and expired: not retried",
                with_deadline(
                    ws(build(Stop, Canceled, Autostop, "2026-06-01T16:00:00Z")),
                    Some("2026-06-01T16:00:00Z"),
                    None,
                ),
                policy(),
                minute(now),
                Nothing,
            ),
            case(
                "prebuilt workspace",
                prebuilt(with_deadline(running(), Some("2026-06-01T16:00:00Z"), None)),
                policy(),
                minute(now),
                Nothing,
            ),
            case(
                "a person started it again after the deadline was set",
                with_deadline(
                    ws(build(Start, Succeeded, Initiator, "2026-06-01T16:30:00Z")),
                    Some("2026-06-01T16:00:00Z"),
                    None,
                ),
                policy(),
                minute(now),
                autostop(),
            ),
        ],
        Settings::default(),
    );
}

#[test]
fn autostart() {
    // 2026-06-01 is a Monday.
    let weekday_nine = || with_schedule(stopped(), "0 9 * * 1-5", "UTC");
    let nine = minute("2026-06-01T09:00:00Z");
    check(
        vec![
            case("due", weekday_nine(), policy(), nine, start(false)),
            case(
                "due within a longer window",
                weekday_nine(),
                policy(),
                span("2026-06-01T08:55:00Z", "2026-06-01T09:03:00Z"),
                start(false),
            ),
            case(
                "the tick after: already due once",
                weekday_nine(),
                policy(),
                minute("2026-06-01T09:01:00Z"),
                Nothing,
            ),
            case(
                "the tick before",
                weekday_nine(),
                policy(),
                minute("2026-06-01T08:59:00Z"),
                Nothing,
            ),
            case(
                "no schedule",
                stopped(),
                policy(),
                nine,
                Nothing,
            ),
            case(
                "owner suspended",
                suspended(weekday_nine()),
                policy(),
                nine,
                Nothing,
            ),
            case(
                "dormant",
                dormant(weekday_nine(), "2026-05-01T00:00:00Z", None, None),
                policy(),
                nine,
                Nothing,
            ),
            case(
                "template forbids user autostart",
                weekday_nine(),
                TemplatePolicy {
                    allow_user_autostart: false,
                    ..policy()
                },
                nine,
                Nothing,
            ),
            case(
                "template allows no day",
                weekday_nine(),
                TemplatePolicy {
                    autostart_days: Weekdays::NONE,
                    ..policy()
                },
                nine,
                Nothing,
            ),
            case(
                "Monday not among the template's days",
                weekday_nine(),
                TemplatePolicy {
                    autostart_days: Weekdays::of(&[Weekday::Tue, Weekday::Wed]),
                    ..policy()
                },
                nine,
                Nothing,
            ),
            case(
                "a daily cron on a Saturday, weekdays only",
                with_schedule(stopped(), "0 9 * * *", "UTC"),
                weekdays_only(),
                minute("2026-06-06T09:00:00Z"),
                Nothing,
            ),
            case(
                "a daily cron on a Friday, weekdays only",
                with_schedule(stopped(), "0 9 * * *", "UTC"),
                weekdays_only(),
                minute("2026-06-05T09:00:00Z"),
                start(false),
            ),
            case(
                "active version required, not on it: updates",
                outdated(weekday_nine()),
                TemplatePolicy {
                    require_active_version: true,
                    ..policy()
                },
                nine,
                start(true),
            ),
            case(
                "active version required, on it",
                weekday_nine(),
                TemplatePolicy {
                    require_active_version: true,
                    ..policy()
                },
                nine,
                start(false),
            ),
            case(
                "not on the active version, not required",
                outdated(weekday_nine()),
                policy(),
                nine,
                start(false),
            ),
            case(
                "already running",
                with_schedule(running(), "0 9 * * 1-5", "UTC"),
                policy(),
                nine,
                Nothing,
            ),
            case(
                "a start in progress",
                with_schedule(
                    ws(build(Start, Pending, Initiator, "2026-06-01T08:59:30Z")),
                    "0 9 * * 1-5",
                    "UTC",
                ),
                policy(),
                nine,
                Nothing,
            ),
            case(
                "a person stopped it after the occurrence: the person wins",
                with_schedule(
                    ws(build(Stop, Succeeded, Initiator, "2026-06-01T09:00:30Z")),
                    "0 9 * * 1-5",
                    "UTC",
                ),
                policy(),
                span("2026-06-01T08:59:30Z", "2026-06-01T09:00:45Z"),
                Nothing,
            ),
            case(
                "autostopped the evening before",
                with_schedule(
                    ws(build(Stop, Succeeded, Autostop, "2026-05-31T18:00:00Z")),
                    "0 9 * * 1-5",
                    "UTC",
                ),
                policy(),
                nine,
                start(false),
            ),
            case(
                "a person canceled their start",
                with_schedule(
                    ws(build(Start, Canceled, Initiator, "2026-05-31T18:00:00Z")),
                    "0 9 * * 1-5",
                    "UTC",
                ),
                policy(),
                nine,
                start(false),
            ),
            case(
                "last build failed",
                with_schedule(
                    ws(build(Stop, Failed, Initiator, "2026-05-31T18:00:00Z")),
                    "0 9 * * 1-5",
                    "UTC",
                ),
                policy(),
                nine,
                Nothing,
            ),
            case(
                "yesterday's autostart is held",
                with_schedule(
                    ws(build(Start, AwaitingConfirmation, Autostart, "2026-05-31T09:00:00Z")),
                    "0 9 * * *",
                    "UTC",
                ),
                policy(),
                nine,
                Nothing,
            ),
            case(
                "yesterday's autostart was held and expired: not retried",
                with_schedule(
                    ws(build(Start, Canceled, Autostart, "2026-05-31T09:00:00Z")),
                    "0 9 * * *",
                    "UTC",
                ),
                policy(),
                nine,
                Nothing,
            ),
            case(
                "yesterday's autostart was blocked: not retried",
                with_schedule(
                    ws(blocked(build(Start, Failed, Autostart, "2026-05-31T09:00:00Z"))),
                    "0 9 * * *",
                    "UTC",
                ),
                policy(),
                nine,
                Nothing,
            ),
            case(
                "a person's stop after the blocked autostart unblocks it",
                with_schedule(
                    ws(build(Stop, Succeeded, Initiator, "2026-05-31T10:00:00Z")),
                    "0 9 * * *",
                    "UTC",
                ),
                policy(),
                nine,
                start(false),
            ),
            case(
                "prebuilt workspace",
                prebuilt(weekday_nine()),
                policy(),
                nine,
                Nothing,
            ),
            case(
                "a stored cron that does not parse",
                with_schedule(stopped(), "0 25 * * *", "UTC"),
                policy(),
                nine,
                Expect::Problem("cron `0 25 * * *`: the hour field `25` is not valid (0-23)"),
            ),
            case(
                "a stored time zone that does not exist",
                with_schedule(stopped(), "0 9 * * *", "Mars/Olympus"),
                policy(),
                nine,
                Expect::Problem("unknown time zone `Mars/Olympus`: expected an IANA name such as Europe/Paris or UTC"),
            ),
            case(
                "after an outage, the first allowed day's occurrence in the window",
                with_schedule(stopped(), "0 9 * * *", "UTC"),
                TemplatePolicy {
                    autostart_days: Weekdays::of(&[Weekday::Wed]),
                    ..policy()
                },
                span("2026-06-01T00:00:00Z", "2026-06-03T12:00:00Z"),
                start(false),
            ),
            case(
                "after an outage, no allowed day in the window",
                with_schedule(stopped(), "0 9 * * *", "UTC"),
                TemplatePolicy {
                    autostart_days: Weekdays::of(&[Weekday::Thu]),
                    ..policy()
                },
                span("2026-06-01T00:00:00Z", "2026-06-03T12:00:00Z"),
                Nothing,
            ),
        ],
        Settings::default(),
    );
}

#[test]
fn autostart_in_time_zones() {
    let paris = || {
        with_schedule(
            stopped_before("2026-01-01T00:00:00Z"),
            "30 8 * * *",
            "Europe/Paris",
        )
    };
    let new_york = || with_schedule(stopped(), "30 8 * * *", "America/New_York");
    let new_york_late = || with_schedule(stopped(), "30 23 * * *", "America/New_York");
    let mondays = || TemplatePolicy {
        autostart_days: Weekdays::of(&[Weekday::Mon]),
        ..policy()
    };
    let spring_ny = || {
        with_schedule(
            stopped_before("2026-03-07T00:00:00Z"),
            "30 2 * * *",
            "America/New_York",
        )
    };
    let paris_half_two = |since| with_schedule(stopped_before(since), "30 2 * * *", "Europe/Paris");
    check(
        vec![
            // Summer: Paris is UTC+2, New York UTC-4.
            case(
                "Paris 08:30 is 06:30 UTC",
                paris(),
                policy(),
                minute("2026-06-01T06:30:00Z"),
                start(false),
            ),
            case(
                "Paris, 08:30 UTC is not it",
                paris(),
                policy(),
                minute("2026-06-01T08:30:00Z"),
                Nothing,
            ),
            case(
                "New York 08:30 is 12:30 UTC",
                new_york(),
                policy(),
                minute("2026-06-01T12:30:00Z"),
                start(false),
            ),
            case(
                "New York, 08:30 UTC is not it",
                new_york(),
                policy(),
                minute("2026-06-01T08:30:00Z"),
                Nothing,
            ),
            // Winter: Paris is UTC+1.
            case(
                "Paris in January",
                paris(),
                policy(),
                minute("2026-01-12T07:30:00Z"),
                start(false),
            ),
            // The allowed day is the schedule zone's day, not UTC's.
            case(
                "Monday 23:30 in New York is Tuesday in UTC: allowed",
                new_york_late(),
                mondays(),
                minute("2026-06-02T03:30:00Z"),
                start(false),
            ),
            case(
                "Sunday 23:30 in New York is Monday in UTC: not allowed",
                new_york_late(),
                mondays(),
                minute("2026-06-01T03:30:00Z"),
                Nothing,
            ),
            // New York springs forward on 2026-03-08: 02:00 EST becomes 03:00
            // EDT, so 02:30 does not exist and fires at 03:00 EDT (07:00 UTC).
            case(
                "NY spring forward: 01:30 EST",
                spring_ny(),
                policy(),
                minute("2026-03-08T06:30:00Z"),
                Nothing,
            ),
            case(
                "NY spring forward: 03:00 EDT",
                spring_ny(),
                policy(),
                minute("2026-03-08T07:00:00Z"),
                start(false),
            ),
            case(
                "NY spring forward: 03:30 EDT",
                spring_ny(),
                policy(),
                minute("2026-03-08T07:30:00Z"),
                Nothing,
            ),
            case(
                "NY the day before: 02:30 EST",
                spring_ny(),
                policy(),
                minute("2026-03-07T07:30:00Z"),
                start(false),
            ),
            case(
                "NY the day after: 02:30 EDT",
                spring_ny(),
                policy(),
                minute("2026-03-09T06:30:00Z"),
                start(false),
            ),
            // Paris springs forward on 2026-03-29 (02:00 CET becomes 03:00
            // CEST, 01:00 UTC) and falls back on 2026-10-25 (03:00 CEST
            // becomes 02:00 CET, 01:00 UTC): 02:30 happens twice, fires once.
            case(
                "Paris spring forward: 03:00 CEST",
                paris_half_two("2026-03-28T12:00:00Z"),
                policy(),
                minute("2026-03-29T01:00:00Z"),
                start(false),
            ),
            case(
                "Paris spring forward: the whole night, once",
                paris_half_two("2026-03-28T12:00:00Z"),
                policy(),
                span("2026-03-28T22:00:00Z", "2026-03-29T00:59:00Z"),
                Nothing,
            ),
            case(
                "Paris fall back: the first 02:30 (CEST)",
                paris_half_two("2026-10-24T12:00:00Z"),
                policy(),
                minute("2026-10-25T00:30:00Z"),
                start(false),
            ),
            case(
                "Paris fall back: the second 02:30 (CET) does not fire",
                paris_half_two("2026-10-24T12:00:00Z"),
                policy(),
                minute("2026-10-25T01:30:00Z"),
                Nothing,
            ),
        ],
        Settings::default(),
    );
}

/// Stopped by its owner at `when`.
fn stopped_before(when: &str) -> Workspace {
    ws(build(Stop, Succeeded, Initiator, when))
}

#[test]
fn failure_ttl_stop() {
    let now = minute("2026-06-01T09:00:00Z");
    let failed_start = |reason| ws(build(Start, Failed, reason, "2026-06-01T08:00:00Z"));
    check(
        vec![
            case(
                "a person's start failed an hour ago",
                failed_start(Initiator),
                failure_ttl(hours(1)),
                now,
                failure_stop(),
            ),
            case(
                "an autostart failed an hour ago",
                failed_start(Autostart),
                failure_ttl(hours(1)),
                now,
                failure_stop(),
            ),
            case(
                "not yet",
                failed_start(Initiator),
                failure_ttl(hours(2)),
                now,
                Nothing,
            ),
            case(
                "failure ttl off",
                failed_start(Initiator),
                policy(),
                now,
                Nothing,
            ),
            case(
                "the start was blocked by the guard",
                ws(blocked(build(
                    Start,
                    Failed,
                    Autostart,
                    "2026-06-01T08:00:00Z",
                ))),
                failure_ttl(hours(1)),
                now,
                Nothing,
            ),
            case(
                "a failed stop is not a failed start",
                ws(build(Stop, Failed, Initiator, "2026-06-01T08:00:00Z")),
                failure_ttl(hours(1)),
                now,
                Nothing,
            ),
            case(
                "the failure-ttl stop itself failed: not retried",
                ws(build(
                    Stop,
                    Failed,
                    BuildReason::FailureTtl,
                    "2026-06-01T08:00:00Z",
                )),
                failure_ttl(hours(1)),
                now,
                Nothing,
            ),
            case(
                "suspended owner: still stopped",
                suspended(failed_start(Initiator)),
                failure_ttl(hours(1)),
                now,
                failure_stop(),
            ),
            case(
                "prebuilt workspace",
                prebuilt(failed_start(Initiator)),
                failure_ttl(hours(1)),
                now,
                Nothing,
            ),
        ],
        Settings::default(),
    );
}

#[test]
fn dormancy_rules() {
    // Last used 2026-05-01; 30 days later is 2026-05-31 00:00.
    let now = minute("2026-06-01T09:00:00Z");
    let unused = |w| last_used(w, "2026-05-01T00:00:00Z");
    check(
        vec![
            case(
                "stopped, unused 31 days",
                unused(stopped()),
                dormancy(),
                now,
                mark_dormant(false, Some("2026-06-15T09:00:00Z")),
            ),
            case(
                "running, unused 31 days: stopped too",
                unused(running()),
                dormancy(),
                now,
                mark_dormant(true, Some("2026-06-15T09:00:00Z")),
            ),
            case(
                "running past its deadline: autostop comes first",
                unused(with_deadline(running(), Some("2026-06-01T08:00:00Z"), None)),
                dormancy(),
                now,
                autostop(),
            ),
            case(
                "unused exactly the threshold",
                unused(stopped()),
                dormancy(),
                minute("2026-05-31T00:00:00Z"),
                mark_dormant(false, Some("2026-06-14T00:00:00Z")),
            ),
            case(
                "used recently",
                last_used(stopped(), "2026-05-20T00:00:00Z"),
                dormancy(),
                now,
                Nothing,
            ),
            case("threshold off", unused(stopped()), policy(), now, Nothing),
            case(
                "no auto-deletion: no deletion date",
                unused(stopped()),
                TemplatePolicy {
                    dormancy_auto_deletion: Duration::ZERO,
                    ..dormancy()
                },
                now,
                mark_dormant(false, None),
            ),
            case(
                "already dormant",
                unused(dormant(stopped(), "2026-05-31T00:00:00Z", None, None)),
                dormancy(),
                now,
                Nothing,
            ),
            case(
                "its start failed: stopped too",
                unused(ws(build(Start, Failed, Initiator, "2026-05-01T00:00:00Z"))),
                dormancy(),
                now,
                mark_dormant(true, Some("2026-06-15T09:00:00Z")),
            ),
            case(
                "a person's stop failed",
                unused(ws(build(Stop, Failed, Initiator, "2026-05-01T00:00:00Z"))),
                dormancy(),
                now,
                mark_dormant(false, Some("2026-06-15T09:00:00Z")),
            ),
            case(
                "suspended owner: still dormant",
                suspended(unused(stopped())),
                dormancy(),
                now,
                mark_dormant(false, Some("2026-06-15T09:00:00Z")),
            ),
            case(
                "a build in progress",
                unused(ws(build(Stop, Pending, Initiator, "2026-06-01T08:59:00Z"))),
                dormancy(),
                now,
                Nothing,
            ),
            case(
                "a held build",
                unused(ws(build(
                    Stop,
                    AwaitingConfirmation,
                    Autostop,
                    "2026-05-01T00:00:00Z",
                ))),
                dormancy(),
                now,
                Nothing,
            ),
            case(
                "a failed autostop needs a person",
                unused(ws(build(Stop, Failed, Autostop, "2026-05-01T00:00:00Z"))),
                dormancy(),
                now,
                Nothing,
            ),
            case(
                "a blocked build needs a person",
                unused(ws(blocked(build(
                    Start,
                    Failed,
                    Initiator,
                    "2026-05-01T00:00:00Z",
                )))),
                dormancy(),
                now,
                Nothing,
            ),
            case(
                "prebuilt workspace",
                prebuilt(unused(stopped())),
                dormancy(),
                now,
                Nothing,
            ),
        ],
        Settings::default(),
    );
}

#[test]
fn dormant_deletion() {
    // Dormant since 2026-05-01: deleted from 2026-05-15 00:00, told a day before.
    let since = "2026-05-01T00:00:00Z";
    let told = |notified: Option<&str>| dormant(stopped(), since, None, notified);
    check(
        vec![
            case(
                "two days before",
                told(None),
                dormancy(),
                minute("2026-05-13T00:00:00Z"),
                Nothing,
            ),
            case(
                "a day before: told",
                told(None),
                dormancy(),
                minute("2026-05-14T00:00:00Z"),
                notify("2026-05-15T00:00:00Z"),
            ),
            case(
                "told, not yet due",
                told(Some("2026-05-14T00:00:00Z")),
                dormancy(),
                minute("2026-05-14T23:59:00Z"),
                Nothing,
            ),
            case(
                "told, due",
                told(Some("2026-05-14T00:00:00Z")),
                dormancy(),
                minute("2026-05-15T00:00:00Z"),
                delete(),
            ),
            case(
                "due but never told: told now, a day's notice",
                told(None),
                dormancy(),
                minute("2026-05-20T10:00:00Z"),
                notify("2026-05-21T10:00:00Z"),
            ),
            case(
                "told late: waits the full notice",
                told(Some("2026-05-20T10:00:00Z")),
                dormancy(),
                minute("2026-05-21T09:59:00Z"),
                Nothing,
            ),
            case(
                "told late: then deleted",
                told(Some("2026-05-20T10:00:00Z")),
                dormancy(),
                minute("2026-05-21T10:00:00Z"),
                delete(),
            ),
            case(
                "a stored deletion date wins over the policy",
                dormant(stopped(), since, Some("2026-05-30T00:00:00Z"), None),
                dormancy(),
                minute("2026-05-15T00:00:00Z"),
                Nothing,
            ),
            case(
                "a stored deletion date: told a day before it",
                dormant(stopped(), since, Some("2026-05-30T00:00:00Z"), None),
                dormancy(),
                minute("2026-05-29T00:00:00Z"),
                notify("2026-05-30T00:00:00Z"),
            ),
            case(
                "auto-deletion turned off since",
                dormant(
                    stopped(),
                    since,
                    Some("2026-05-15T00:00:00Z"),
                    Some("2026-05-14T00:00:00Z"),
                ),
                TemplatePolicy {
                    dormancy_auto_deletion: Duration::ZERO,
                    ..dormancy()
                },
                minute("2026-05-20T00:00:00Z"),
                Nothing,
            ),
            case(
                "a running dormant workspace is deleted too",
                dormant(running(), since, None, Some("2026-05-14T00:00:00Z")),
                dormancy(),
                minute("2026-06-01T09:00:00Z"),
                delete(),
            ),
            case(
                "suspended owner: still deleted",
                suspended(told(Some("2026-05-14T00:00:00Z"))),
                dormancy(),
                minute("2026-05-15T00:00:00Z"),
                delete(),
            ),
            case(
                "the deletion failed: not retried within 24 h",
                dormant(
                    ws(build(Delete, Failed, Autodelete, "2026-05-15T00:00:00Z")),
                    since,
                    None,
                    Some("2026-05-14T00:00:00Z"),
                ),
                dormancy(),
                minute("2026-05-15T23:59:00Z"),
                Nothing,
            ),
            case(
                "the deletion failed: retried 24 h later",
                dormant(
                    ws(build(Delete, Failed, Autodelete, "2026-05-15T00:00:00Z")),
                    since,
                    None,
                    Some("2026-05-14T00:00:00Z"),
                ),
                dormancy(),
                minute("2026-05-16T00:00:00Z"),
                delete(),
            ),
            case(
                "the deletion is held (a protected resource)",
                dormant(
                    ws(build(
                        Delete,
                        AwaitingConfirmation,
                        Autodelete,
                        "2026-05-15T00:00:00Z",
                    )),
                    since,
                    None,
                    Some("2026-05-14T00:00:00Z"),
                ),
                dormancy(),
                minute("2026-05-17T00:00:00Z"),
                Nothing,
            ),
            case(
                "the held deletion expired: never retried",
                dormant(
                    ws(build(Delete, Canceled, Autodelete, "2026-05-15T00:00:00Z")),
                    since,
                    None,
                    Some("2026-05-14T00:00:00Z"),
                ),
                dormancy(),
                minute("2026-05-17T00:00:00Z"),
                Nothing,
            ),
            case(
                "the deletion was blocked: never retried",
                dormant(
                    ws(blocked(build(
                        Delete,
                        Failed,
                        Autodelete,
                        "2026-05-15T00:00:00Z",
                    ))),
                    since,
                    None,
                    Some("2026-05-14T00:00:00Z"),
                ),
                dormancy(),
                minute("2026-05-17T00:00:00Z"),
                Nothing,
            ),
            case(
                "a delete in progress",
                dormant(
                    ws(build(Delete, Pending, Autodelete, "2026-05-15T00:00:00Z")),
                    since,
                    None,
                    Some("2026-05-14T00:00:00Z"),
                ),
                dormancy(),
                minute("2026-05-17T00:00:00Z"),
                Nothing,
            ),
            case(
                "prebuilt workspace",
                prebuilt(told(Some("2026-05-14T00:00:00Z"))),
                dormancy(),
                minute("2026-05-15T00:00:00Z"),
                Nothing,
            ),
        ],
        Settings::default(),
    );
}

#[test]
fn short_notice_and_retry_settings() {
    // What an end-to-end test runs with: a minute's notice, five minutes' retry.
    let settings = Settings {
        deletion_notice: Duration::from_secs(60),
        deletion_retry: Duration::from_secs(300),
    };
    let policy = TemplatePolicy {
        dormancy_auto_deletion: Duration::from_secs(120),
        ..policy()
    };
    let since = "2026-06-01T09:00:00Z";
    check(
        vec![
            case(
                "a minute before: told",
                dormant(stopped(), since, None, None),
                policy.clone(),
                minute("2026-06-01T09:01:00Z"),
                notify("2026-06-01T09:02:00Z"),
            ),
            case(
                "told, due",
                dormant(stopped(), since, None, Some("2026-06-01T09:01:00Z")),
                policy.clone(),
                minute("2026-06-01T09:02:00Z"),
                delete(),
            ),
            case(
                "failed four minutes ago",
                dormant(
                    ws(build(Delete, Failed, Autodelete, "2026-06-01T09:02:00Z")),
                    since,
                    None,
                    Some("2026-06-01T09:01:00Z"),
                ),
                policy.clone(),
                minute("2026-06-01T09:06:00Z"),
                Nothing,
            ),
            case(
                "failed five minutes ago",
                dormant(
                    ws(build(Delete, Failed, Autodelete, "2026-06-01T09:02:00Z")),
                    since,
                    None,
                    Some("2026-06-01T09:01:00Z"),
                ),
                policy,
                minute("2026-06-01T09:07:00Z"),
                delete(),
            ),
        ],
        settings,
    );
}

#[test]
fn one_tick_over_many_workspaces() {
    // Each workspace is judged on its own facts and its own template's policy;
    // actions keep the snapshot's order; a missing policy is a problem.
    let mut due = with_deadline(running(), Some("2026-06-01T08:30:00Z"), None);
    due.id = "a".into();
    let mut idle = stopped();
    idle.id = "b".into();
    let mut scheduled = with_schedule(stopped(), "0 9 * * *", "UTC");
    scheduled.id = "c".into();
    scheduled.template_id = "strict".into();
    let mut orphan = stopped();
    orphan.id = "d".into();
    orphan.template_id = "gone".into();
    let snapshot = Snapshot {
        templates: vec![
            policy(),
            TemplatePolicy {
                require_active_version: true,
                ..TemplatePolicy::new("strict")
            },
        ],
        workspaces: vec![due, idle, orphan, scheduled],
    };
    let tick = Tick {
        previous: at("2026-06-01T08:59:00Z"),
        now: at("2026-06-01T09:00:00Z"),
        settings: Settings::default(),
    };
    assert_eq!(
        decide(&snapshot, &tick),
        Decision {
            actions: vec![
                Action::Stop {
                    workspace_id: "a".into(),
                    reason: StopReason::Autostop
                },
                Action::Start {
                    workspace_id: "c".into(),
                    update: false
                },
            ],
            problems: vec![Problem {
                workspace_id: "d".into(),
                message: "no policy for template `gone`".into()
            }],
        }
    );
}

#[test]
fn a_schedule_cache_changes_no_decision_and_keeps_only_schedules_in_use() {
    let mut nine = with_schedule(stopped(), "0 9 * * *", "UTC");
    nine.id = "nine".into();
    let mut ten = with_schedule(stopped(), "0 10 * * *", "Europe/Paris");
    ten.id = "ten".into();
    let mut broken = with_schedule(stopped(), "0 9 * *", "UTC");
    broken.id = "broken".into();
    let both = Snapshot {
        templates: vec![policy()],
        workspaces: vec![nine.clone(), ten, broken],
    };
    let only_nine = Snapshot {
        templates: vec![policy()],
        workspaces: vec![nine],
    };
    let mut cache = ScheduleCache::default();
    for now in [
        "2026-06-01T08:00:00Z",
        "2026-06-01T09:00:00Z",
        "2026-06-02T08:00:00Z",
    ] {
        let tick = Tick {
            previous: at(now) - chrono::TimeDelta::hours(1),
            now: at(now),
            settings: Settings::default(),
        };
        assert_eq!(
            decide_with(&both, &tick, &mut cache),
            decide(&both, &tick),
            "{now}"
        );
        assert_eq!(cache.len(), 3, "{now}");
    }
    let tick = Tick {
        previous: at("2026-06-02T08:00:00Z"),
        now: at("2026-06-02T09:00:00Z"),
        settings: Settings::default(),
    };
    assert_eq!(
        decide_with(&only_nine, &tick, &mut cache),
        decide(&only_nine, &tick)
    );
    assert_eq!(cache.len(), 1);
}
