//! One reconciliation decision over 1,000 presets and 10,000 prebuilt
//! workspaces (issue 12's goal: under 50 ms). Run with
//! `cargo bench -p abode-prebuilds`; it prints the median of the runs.
//!
//! Every preset has a schedule in one of a few time zones and a ttl, every
//! pool has workspaces in every state, and a tenth of the presets belong to
//! inactive versions, so each rule is exercised.

use std::hint::black_box;
use std::time::{Duration, Instant};

use abode_contract::presets::{
    PrebuildSchedule, PrebuildScheduling, PrebuildSettings, PresetDefinition,
};
use abode_contract::Transition;
use abode_prebuilds::{
    decide, FailureHistory, PrebuildState, PrebuiltWorkspace, PresetSnapshot, Settings, Snapshot,
};
use chrono::{DateTime, TimeDelta, Utc};

const PRESETS: usize = 1_000;
const WORKSPACES: usize = 10_000;
const PRESETS_PER_TEMPLATE: usize = 4;
const RUNS: usize = 101;
const ZONES: &[&str] = &[
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "Asia/Tokyo",
    "Australia/Sydney",
];

fn snapshot(now: DateTime<Utc>) -> Snapshot {
    let presets = (0..PRESETS)
        .map(|i| {
            let template = i / PRESETS_PER_TEMPLATE;
            // One template in ten still has the pools of an older version.
            let inactive = template % 10 == 9;
            PresetSnapshot {
                template_id: format!("template-{template:04}"),
                template_name: format!("template {template:04}"),
                version_id: format!("version-{template:04}-{}", if inactive { 1 } else { 2 }),
                version_active: !inactive,
                preset: PresetDefinition {
                    name: format!("preset-{}", i % PRESETS_PER_TEMPLATE),
                    parameters: Default::default(),
                    prebuilds: Some(PrebuildSettings {
                        instances: (i % 12) as i64,
                        ttl_seconds: 86_400,
                        scheduling: Some(PrebuildScheduling {
                            timezone: ZONES[i % ZONES.len()].to_string(),
                            schedules: vec![
                                PrebuildSchedule {
                                    cron: "* 8-17 * * 1-5".into(),
                                    instances: (i % 15) as i64,
                                },
                                PrebuildSchedule {
                                    cron: "* 0-6 * * *".into(),
                                    instances: 1,
                                },
                            ],
                        }),
                    }),
                },
                failures: FailureHistory {
                    consecutive_failures: (i % 5) as u32,
                    last_failure_at: Some(now - TimeDelta::minutes((i % 7) as i64)),
                    hard_limit_notified: i % 2 == 0,
                },
                last_cost: (i % 3 != 0).then_some((i % 4) as i64),
                quota_limited_notified: i % 6 == 0,
                template_deprecated: false,
            }
        })
        .collect::<Vec<_>>();
    let workspaces = (0..WORKSPACES)
        .map(|i| {
            let preset = &presets[i % PRESETS];
            let state = match i % 10 {
                0 => PrebuildState::InProgress {
                    build_id: format!("build-{i:05}"),
                    transition: Transition::Start,
                    pending: i % 20 == 0,
                },
                1 => PrebuildState::InProgress {
                    build_id: format!("build-{i:05}"),
                    transition: Transition::Delete,
                    pending: false,
                },
                2 => PrebuildState::Failed {
                    transition: Transition::Start,
                },
                3 => PrebuildState::Stopped,
                4 => PrebuildState::Held {
                    build_id: format!("build-{i:05}"),
                },
                5 | 6 => PrebuildState::Running { ready: false },
                _ => PrebuildState::Running { ready: true },
            };
            PrebuiltWorkspace {
                workspace_id: format!("workspace-{i:05}"),
                version_id: preset.version_id.clone(),
                preset_name: preset.preset.name.clone(),
                created_at: now - TimeDelta::minutes(((i * 37) % 3000) as i64),
                state,
                daily_cost: (i % 4 != 0).then_some((i % 3) as i64),
            }
        })
        .collect();
    Snapshot {
        presets,
        workspaces,
        paused: false,
        // Room for some of what the pools want, not all.
        budget: Some(5_000),
    }
}

fn main() {
    let now: DateTime<Utc> = match "2026-03-09T13:30:00Z".parse() {
        Ok(now) => now,
        Err(err) => panic!("the benchmark's time does not parse: {err}"),
    };
    let snapshot = snapshot(now);
    let settings = Settings {
        backoff: Duration::from_secs(60),
        failure_hard_limit: 3,
    };
    let first = decide(&snapshot, &settings, now);
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            black_box(decide(black_box(&snapshot), &settings, now));
            start.elapsed()
        })
        .collect();
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "decide: {PRESETS} presets, {WORKSPACES} workspaces ({} actions, {} statuses): \
         median {:.2} ms, min {:.2} ms, p90 {:.2} ms over {RUNS} runs (goal: under 50 ms)",
        first.actions.len(),
        first.presets.len(),
        ms(times[RUNS / 2]),
        ms(times[0]),
        ms(times[RUNS * 9 / 10]),
    );
}
