//! One tick's decision over 10,000 workspaces (issue 13's goal: under
//! 100 ms). Run with `cargo bench -p abode-schedule`; it prints the median of
//! the runs.
//!
//! The workspaces belong to 100 templates with every rule enabled and are in
//! every state the rules tell apart; half are stopped with an autostart
//! schedule in one of five time zones. Owners pick their own minute and hour,
//! so there are ~1,200 distinct schedules; a second run gives every stopped
//! workspace a schedule of its own, the worst case. Each is timed as a
//! server's first tick (every schedule parsed) and as the ticks after (the
//! parsed schedules kept in a [`ScheduleCache`]).

use std::collections::HashSet;
use std::hint::black_box;
use std::time::{Duration, Instant};

use abode_contract::Transition;
use abode_schedule::{
    decide, decide_with, AutostartSchedule, BuildReason, BuildStatus, Dormancy, LatestBuild,
    OwnerStatus, ScheduleCache, Settings, Snapshot, TemplatePolicy, Tick, Weekdays, Workspace,
};
use chrono::{DateTime, TimeDelta, Utc};

const TEMPLATES: usize = 100;
const WORKSPACES: usize = 10_000;
const RUNS: usize = 101;
const ZONES: &[&str] = &[
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "Asia/Tokyo",
    "Australia/Sydney",
];

fn hours(n: u64) -> Duration {
    Duration::from_secs(n * 3600)
}

fn snapshot(now: DateTime<Utc>, distinct_schedules: bool) -> Snapshot {
    let templates = (0..TEMPLATES)
        .map(|t| TemplatePolicy {
            default_ttl: hours(8),
            max_ttl: hours(24),
            autostart_days: Weekdays::parse("mon,tue,wed,thu,fri").unwrap_or(Weekdays::ALL),
            failure_ttl: hours(1),
            dormancy_threshold: hours(24 * 30),
            dormancy_auto_deletion: hours(24 * 14),
            require_active_version: t % 2 == 0,
            ..TemplatePolicy::new(format!("template-{t:03}"))
        })
        .collect();
    let ago = |minutes: usize| now - TimeDelta::minutes(minutes as i64);
    let workspaces = (0..WORKSPACES)
        .map(|i| {
            let build = |transition, status, reason, minutes| LatestBuild {
                transition,
                status,
                reason,
                blocked: false,
                created_at: ago(minutes),
                finished_at: Some(ago(minutes)),
            };
            use BuildReason::{Autodelete, Autostart, Autostop, Initiator};
            use BuildStatus::{AwaitingConfirmation, Canceled, Failed, Running, Succeeded};
            use Transition::{Delete, Start, Stop};
            // Half stopped (the autostart candidates), the rest spread over
            // the other states.
            let latest = match i % 20 {
                0..=9 => build(Stop, Succeeded, Autostop, 600 + i % 900),
                10..=13 => build(Start, Succeeded, Initiator, i % 900),
                14 => build(Start, Failed, Autostart, i % 120),
                15 => build(Stop, Running, Initiator, 1),
                16 => build(Start, AwaitingConfirmation, Autostart, 30),
                17 => build(Delete, Failed, Autodelete, i % 3000),
                18 => build(Stop, Canceled, Autostop, 60),
                _ => build(Stop, Failed, Initiator, 60 * 24 * 40),
            };
            // The stopped workspaces numbered 0..5,000, so that schedules
            // are spread over them independently of the other states.
            let n = i / 20 * 10 + i % 10;
            let (hour, zone) = if distinct_schedules {
                (n / 60 % 24, n / 1440 % ZONES.len())
            } else {
                (7 + n / 60 % 4, n / 240 % ZONES.len())
            };
            let schedule = AutostartSchedule {
                cron: format!("{} {hour} * * 1-5", n % 60),
                timezone: ZONES[zone].to_string(),
            };
            Workspace {
                id: format!("workspace-{i:05}"),
                template_id: format!("template-{:03}", i % TEMPLATES),
                owner: if i % 50 == 0 {
                    OwnerStatus::Suspended
                } else {
                    OwnerStatus::Active
                },
                prebuilt: i % 97 == 0,
                latest_build: Some(latest),
                on_active_version: i % 3 != 0,
                autostart: (i % 20 < 10).then_some(schedule),
                ttl: None,
                deadline: Some(ago(i % 600) + TimeDelta::hours(4)),
                max_deadline: Some(ago(i % 600) + TimeDelta::hours(20)),
                last_used_at: ago((i * 37) % (60 * 24 * 45)),
                dormancy: (i % 20 >= 17).then(|| Dormancy {
                    dormant_at: ago(60 * 24 * (i % 20)),
                    deleting_at: None,
                    deletion_notified_at: (i % 2 == 0).then(|| ago(60 * 24)),
                }),
            }
        })
        .collect();
    Snapshot {
        templates,
        workspaces,
    }
}

fn run(now: DateTime<Utc>, distinct_schedules: bool) {
    let snapshot = snapshot(now, distinct_schedules);
    let tick = Tick {
        now,
        previous: now - TimeDelta::minutes(1),
        settings: Settings::default(),
    };
    let first = decide(&snapshot, &tick);
    let schedules: HashSet<&AutostartSchedule> = snapshot
        .workspaces
        .iter()
        .filter_map(|workspace| workspace.autostart.as_ref())
        .collect();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let report = |what: &str, mut times: Vec<Duration>| {
        times.sort();
        println!(
            "decide, {what}: {WORKSPACES} workspaces, {TEMPLATES} templates, {} distinct \
             schedules ({} actions, {} problems): median {:.2} ms, min {:.2} ms, p90 {:.2} ms \
             over {RUNS} runs (goal: under 100 ms)",
            schedules.len(),
            first.actions.len(),
            first.problems.len(),
            ms(times[RUNS / 2]),
            ms(times[0]),
            ms(times[RUNS * 9 / 10]),
        );
    };
    // A server's first tick: every schedule is parsed.
    let cold = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            black_box(decide(black_box(&snapshot), &tick));
            start.elapsed()
        })
        .collect();
    report("first tick", cold);
    // The ticks after: the loop keeps the schedules it parsed.
    let mut cache = ScheduleCache::default();
    let again = decide_with(&snapshot, &tick, &mut cache);
    assert_eq!(again, first, "a cache changes no decision");
    let warm = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            black_box(decide_with(black_box(&snapshot), &tick, &mut cache));
            start.elapsed()
        })
        .collect();
    report("next ticks", warm);
}

fn main() {
    // A Monday morning, when autostarts are due.
    let now: DateTime<Utc> = match "2026-03-09T08:30:00Z".parse() {
        Ok(now) => now,
        Err(err) => panic!("the benchmark's time does not parse: {err}"),
    };
    run(now, false);
    run(now, true);
}
