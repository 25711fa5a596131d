//! The reconciliation rules as a table of snapshots: each case spells out the
//! snapshot, the time, and the exact actions and statuses expected.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use abode_contract::presets::{
    PrebuildSchedule, PrebuildScheduling, PrebuildSettings, PresetDefinition,
};
use abode_contract::Transition;
use abode_prebuilds::{
    decide, Action, DeleteReason, FailureHistory, PrebuildState, PrebuiltWorkspace, PresetSnapshot,
    PresetStatus, Settings, Snapshot,
};
use chrono::{DateTime, Utc};

// ---- building snapshots -------------------------------------------------

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

/// A pool of `instances`, no ttl, no schedule.
fn pool(instances: i64) -> PrebuildSettings {
    PrebuildSettings {
        instances,
        ttl_seconds: 0,
        scheduling: None,
    }
}

fn with_ttl(mut settings: PrebuildSettings, ttl_seconds: i64) -> PrebuildSettings {
    settings.ttl_seconds = ttl_seconds;
    settings
}

fn scheduled(instances: i64, timezone: &str, schedules: &[(&str, i64)]) -> PrebuildSettings {
    PrebuildSettings {
        instances,
        ttl_seconds: 0,
        scheduling: Some(PrebuildScheduling {
            timezone: timezone.into(),
            schedules: schedules
                .iter()
                .map(|(cron, instances)| PrebuildSchedule {
                    cron: cron.to_string(),
                    instances: *instances,
                })
                .collect(),
        }),
    }
}

/// Preset `name` of version `version` of template `tpl` (id `tpl-id`), active.
fn preset(
    tpl: &str,
    version: &str,
    name: &str,
    prebuilds: Option<PrebuildSettings>,
) -> PresetSnapshot {
    PresetSnapshot {
        template_id: format!("{tpl}-id"),
        template_name: tpl.into(),
        version_id: version.into(),
        version_active: true,
        preset: PresetDefinition {
            name: name.into(),
            parameters: Default::default(),
            prebuilds,
        },
        failures: FailureHistory::default(),
        last_cost: None,
        quota_limited_notified: false,
        template_deprecated: false,
    }
}

fn inactive(mut preset: PresetSnapshot) -> PresetSnapshot {
    preset.version_active = false;
    preset
}

fn failing(
    mut preset: PresetSnapshot,
    failures: u32,
    last: &str,
    notified: bool,
) -> PresetSnapshot {
    preset.failures = FailureHistory {
        consecutive_failures: failures,
        last_failure_at: Some(at(last)),
        hard_limit_notified: notified,
    };
    preset
}

fn ws(
    id: &str,
    version: &str,
    preset: &str,
    created: &str,
    state: PrebuildState,
) -> PrebuiltWorkspace {
    PrebuiltWorkspace {
        workspace_id: id.into(),
        version_id: version.into(),
        preset_name: preset.into(),
        created_at: at(created),
        state,
        daily_cost: None,
    }
}

fn ready() -> PrebuildState {
    PrebuildState::Running { ready: true }
}
fn unready() -> PrebuildState {
    PrebuildState::Running { ready: false }
}
fn building(build: &str, transition: Transition, pending: bool) -> PrebuildState {
    PrebuildState::InProgress {
        build_id: build.into(),
        transition,
        pending,
    }
}
fn failed(transition: Transition) -> PrebuildState {
    PrebuildState::Failed { transition }
}
fn held(build: &str) -> PrebuildState {
    PrebuildState::Held {
        build_id: build.into(),
    }
}

// ---- expected values ----------------------------------------------------

fn create(version: &str, preset: &str) -> Action {
    Action::Create {
        version_id: version.into(),
        preset_name: preset.into(),
    }
}
fn delete(id: &str, reason: DeleteReason) -> Action {
    Action::Delete {
        workspace_id: id.into(),
        reason,
    }
}
fn cancel(build: &str, workspace: &str) -> Action {
    Action::CancelBuild {
        build_id: build.into(),
        workspace_id: workspace.into(),
    }
}
fn notify(tpl: &str, version: &str, preset: &str) -> Action {
    Action::NotifyHardLimited {
        template_id: format!("{tpl}-id"),
        version_id: version.into(),
        preset_name: preset.into(),
    }
}

/// The numbers of one expected status; what is not written is 0/false/None.
#[derive(Default, Clone, Copy)]
struct Counts {
    desired: usize,
    running: usize,
    ready: usize,
    in_progress: usize,
    expired: usize,
    failed: usize,
    consecutive_failures: u32,
    hard_limited: bool,
    paused: bool,
    backing_off_until: Option<&'static str>,
    quota_limited: bool,
    estimated_cost: Option<i64>,
    problem: Option<&'static str>,
}

/// A `backing_off_until` past any representable time.
const NEVER: &str = "never";

fn status(tpl: &str, version: &str, preset: &str, counts: Counts) -> PresetStatus {
    PresetStatus {
        template_id: format!("{tpl}-id"),
        template_name: tpl.into(),
        version_id: version.into(),
        preset_name: preset.into(),
        desired: counts.desired,
        running: counts.running,
        ready: counts.ready,
        in_progress: counts.in_progress,
        expired: counts.expired,
        failed: counts.failed,
        consecutive_failures: counts.consecutive_failures,
        hard_limited: counts.hard_limited,
        paused: counts.paused,
        backing_off_until: counts.backing_off_until.map(|until| match until {
            NEVER => DateTime::<Utc>::MAX_UTC,
            until => at(until),
        }),
        quota_limited: counts.quota_limited,
        estimated_cost: counts.estimated_cost,
        problem: counts.problem.map(String::from),
    }
}

// ---- the table ------------------------------------------------------------

struct Case {
    name: &'static str,
    now: &'static str,
    settings: Settings,
    presets: Vec<PresetSnapshot>,
    workspaces: Vec<PrebuiltWorkspace>,
    paused: bool,
    actions: Vec<Action>,
    statuses: Vec<PresetStatus>,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            name: "",
            now: NOW,
            settings: SETTINGS,
            presets: Vec::new(),
            workspaces: Vec::new(),
            paused: false,
            actions: Vec::new(),
            statuses: Vec::new(),
        }
    }
}

/// One minute of backoff per failure, hard limit 3 (the server's defaults).
const SETTINGS: Settings = Settings {
    backoff: Duration::from_secs(60),
    failure_hard_limit: 3,
};

fn check(case: Case) {
    check_with_budget(case, None);
}

/// [`check`], the `prebuilds` actor's budget `budget` (`None`: quotas not
/// enforced).
fn check_with_budget(case: Case, budget: Option<i64>) {
    let snapshot = Snapshot {
        presets: case.presets,
        workspaces: case.workspaces,
        paused: case.paused,
        budget,
    };
    let decision = decide(&snapshot, &case.settings, at(case.now));
    assert_eq!(decision.actions, case.actions, "{}: actions", case.name);
    assert_eq!(decision.presets, case.statuses, "{}: statuses", case.name);
}

/// A case where one preset `dev` of template `web`, version `v1`, is the
/// whole snapshot, with its workspaces.
fn one_pool(
    name: &'static str,
    now: &'static str,
    prebuilds: PrebuildSettings,
    workspaces: Vec<PrebuiltWorkspace>,
    actions: Vec<Action>,
    counts: Counts,
) -> Case {
    Case {
        name,
        now,
        settings: SETTINGS,
        presets: vec![preset("web", "v1", "dev", Some(prebuilds))],
        workspaces,
        paused: false,
        actions,
        statuses: vec![status("web", "v1", "dev", counts)],
    }
}

const T0: &str = "2026-01-05T10:00:00Z";
const NOW: &str = "2026-01-05T12:00:00Z";

/// Business hours in New York (3 instances, else 1) around its spring-forward
/// change: Sunday 2026-03-08, 02:00 EST (07:00 UTC) becomes 03:00 EDT.
fn new_york_cases() -> Vec<Case> {
    let ny = || {
        scheduled(
            1,
            "America/New_York",
            &[("* 8-17 * * 1-5", 3), ("* 2 * * 0", 9), ("* 3 * * 0", 5)],
        )
    };
    let case = |name, now, desired: usize| {
        let actions = (0..desired).map(|_| create("v1", "dev")).collect();
        one_pool(
            name,
            now,
            ny(),
            vec![],
            actions,
            Counts {
                desired,
                ..Counts::default()
            },
        )
    };
    vec![
        // Friday 2026-03-06, EST (UTC-5).
        case(
            "NY Friday 07:59 EST: before the schedule",
            "2026-03-06T12:59:59Z",
            1,
        ),
        case(
            "NY Friday 08:00 EST: the schedule starts",
            "2026-03-06T13:00:00Z",
            3,
        ),
        case(
            "NY Friday 17:59 EST: last scheduled hour",
            "2026-03-06T22:59:59Z",
            3,
        ),
        case(
            "NY Friday 18:00 EST: after the schedule",
            "2026-03-06T23:00:00Z",
            1,
        ),
        // Sunday 2026-03-08: 01:59 EST, then 03:00 EDT; 02:xx never happens.
        case(
            "NY Sunday 01:59 EST, before the change",
            "2026-03-08T06:59:59Z",
            1,
        ),
        case(
            "NY Sunday 03:00 EDT, right after the change",
            "2026-03-08T07:00:00Z",
            5,
        ),
        case("NY Sunday 03:59 EDT", "2026-03-08T07:59:59Z", 5),
        case("NY Sunday 04:00 EDT", "2026-03-08T08:00:00Z", 1),
        // Monday 2026-03-09, EDT (UTC-4): 12:00 UTC is now 08:00 local.
        case("NY Monday 07:59 EDT", "2026-03-09T11:59:59Z", 1),
        case(
            "NY Monday 08:00 EDT (07:00 EST a week earlier)",
            "2026-03-09T12:00:00Z",
            3,
        ),
        case("NY Monday 17:59 EDT", "2026-03-09T21:59:59Z", 3),
        case("NY Monday 18:00 EDT", "2026-03-09T22:00:00Z", 1),
    ]
}

/// Weekday and weekend hours in Paris (2 on weekdays 8-17, 4 on weekends
/// 10-11, else 0) around both of its 2026 changes: Sunday 2026-03-29 02:00
/// CET (01:00 UTC) becomes 03:00 CEST, and Sunday 2026-10-25 03:00 CEST
/// (01:00 UTC) becomes 02:00 CET, so 02:xx happens twice.
fn paris_cases() -> Vec<Case> {
    let paris = || {
        scheduled(
            0,
            "Europe/Paris",
            &[
                ("* 8-17 * * 1-5", 2),
                ("* 10-11 * * 0,6", 4),
                ("* 2 * 3,10 0", 6),
            ],
        )
    };
    let case = |name, now, desired: usize| {
        let actions = (0..desired).map(|_| create("v1", "dev")).collect();
        one_pool(
            name,
            now,
            paris(),
            vec![],
            actions,
            Counts {
                desired,
                ..Counts::default()
            },
        )
    };
    vec![
        // Saturday 2026-03-28, CET (UTC+1).
        case("Paris Saturday 09:59 CET", "2026-03-28T08:59:59Z", 0),
        case("Paris Saturday 10:00 CET", "2026-03-28T09:00:00Z", 4),
        case("Paris Saturday 11:59 CET", "2026-03-28T10:59:59Z", 4),
        case("Paris Saturday 12:00 CET", "2026-03-28T11:00:00Z", 0),
        // Sunday 2026-03-29: 01:59 CET, then 03:00 CEST; 02:xx never happens.
        case(
            "Paris Sunday 01:59 CET, before the change",
            "2026-03-29T00:59:59Z",
            0,
        ),
        case(
            "Paris Sunday 03:00 CEST, after the change",
            "2026-03-29T01:00:00Z",
            0,
        ),
        // CEST (UTC+2): 08:00 UTC is now 10:00 local.
        case("Paris Sunday 09:59 CEST", "2026-03-29T07:59:59Z", 0),
        case(
            "Paris Sunday 10:00 CEST (09:00 CET the day before)",
            "2026-03-29T08:00:00Z",
            4,
        ),
        case("Paris Sunday 12:00 CEST", "2026-03-29T10:00:00Z", 0),
        // Monday 2026-03-30.
        case("Paris Monday 07:59 CEST", "2026-03-30T05:59:59Z", 0),
        case("Paris Monday 08:00 CEST", "2026-03-30T06:00:00Z", 2),
        // Sunday 2026-10-25: 02:xx CEST, then 02:xx CET again.
        case("Paris October 01:59 CEST", "2026-10-24T23:59:59Z", 0),
        case(
            "Paris October 02:30 CEST, first time",
            "2026-10-25T00:30:00Z",
            6,
        ),
        case(
            "Paris October 02:30 CET, second time",
            "2026-10-25T01:30:00Z",
            6,
        ),
        case("Paris October 03:00 CET", "2026-10-25T02:00:00Z", 0),
    ]
}

fn pool_cases() -> Vec<Case> {
    use DeleteReason::*;
    vec![
        one_pool(
            "an empty pool is filled",
            NOW,
            pool(2),
            vec![],
            vec![create("v1", "dev"), create("v1", "dev")],
            Counts {
                desired: 2,
                ..Counts::default()
            },
        ),
        one_pool(
            "a full pool is left alone, ready or not",
            NOW,
            pool(2),
            vec![
                ws("a", "v1", "dev", T0, ready()),
                ws("b", "v1", "dev", T0, unready()),
            ],
            vec![],
            Counts {
                desired: 2,
                running: 2,
                ready: 1,
                ..Counts::default()
            },
        ),
        one_pool(
            "starts in progress, pending or picked up, count toward the pool",
            NOW,
            pool(3),
            vec![
                ws("a", "v1", "dev", T0, ready()),
                ws(
                    "b",
                    "v1",
                    "dev",
                    T0,
                    building("b1", Transition::Start, true),
                ),
                ws(
                    "c",
                    "v1",
                    "dev",
                    T0,
                    building("c1", Transition::Start, false),
                ),
            ],
            vec![],
            Counts {
                desired: 3,
                running: 1,
                ready: 1,
                in_progress: 2,
                ..Counts::default()
            },
        ),
        one_pool(
            "in-progress deletes and stops, and held builds, are neither counted nor touched",
            NOW,
            pool(2),
            vec![
                ws(
                    "a",
                    "v1",
                    "dev",
                    T0,
                    building("a1", Transition::Delete, false),
                ),
                ws("b", "v1", "dev", T0, building("b1", Transition::Stop, true)),
                ws("c", "v1", "dev", T0, held("c1")),
                ws("d", "v1", "dev", T0, ready()),
            ],
            vec![create("v1", "dev")],
            Counts {
                desired: 2,
                running: 1,
                ready: 1,
                ..Counts::default()
            },
        ),
        one_pool(
            "more running than desired: the oldest go, never one building",
            NOW,
            pool(2),
            vec![
                ws(
                    "old-building",
                    "v1",
                    "dev",
                    "2026-01-01T00:00:00Z",
                    building("s1", Transition::Start, false),
                ),
                ws("r3", "v1", "dev", "2026-01-03T00:00:00Z", ready()),
                ws("r1", "v1", "dev", "2026-01-02T00:00:00Z", unready()),
                ws("r4", "v1", "dev", "2026-01-04T00:00:00Z", ready()),
                ws("r2", "v1", "dev", "2026-01-02T00:00:00Z", ready()),
                ws(
                    "deleting",
                    "v1",
                    "dev",
                    "2026-01-01T00:00:00Z",
                    building("d1", Transition::Delete, false),
                ),
            ],
            // r1 and r2 are as old: the id decides.
            vec![delete("r1", Extraneous), delete("r2", Extraneous)],
            Counts {
                desired: 2,
                running: 4,
                ready: 3,
                in_progress: 1,
                ..Counts::default()
            },
        ),
        one_pool(
            "a start in progress does not make a running one extraneous",
            NOW,
            pool(2),
            vec![
                ws("a", "v1", "dev", T0, ready()),
                ws("b", "v1", "dev", T0, ready()),
                ws(
                    "c",
                    "v1",
                    "dev",
                    T0,
                    building("c1", Transition::Start, false),
                ),
            ],
            vec![],
            Counts {
                desired: 2,
                running: 2,
                ready: 2,
                in_progress: 1,
                ..Counts::default()
            },
        ),
        one_pool(
            "ttl: expired at exactly created_at + ttl, deleted and replaced",
            "2026-01-05T11:00:00Z",
            with_ttl(pool(2), 3600),
            vec![
                ws("fresh", "v1", "dev", "2026-01-05T10:00:01Z", ready()),
                ws("expired", "v1", "dev", "2026-01-05T10:00:00Z", ready()),
                ws("older", "v1", "dev", "2026-01-05T09:00:00Z", unready()),
            ],
            vec![
                delete("older", Expired),
                delete("expired", Expired),
                create("v1", "dev"),
            ],
            Counts {
                desired: 2,
                running: 1,
                ready: 1,
                expired: 2,
                ..Counts::default()
            },
        ),
        one_pool(
            "ttl 0 never expires",
            "2036-01-05T11:00:00Z",
            pool(1),
            vec![ws("ancient", "v1", "dev", "2016-01-01T00:00:00Z", ready())],
            vec![],
            Counts {
                desired: 1,
                running: 1,
                ready: 1,
                ..Counts::default()
            },
        ),
        one_pool(
            "expired first, then extraneous, in one decision",
            "2026-01-05T11:00:00Z",
            with_ttl(pool(1), 3600),
            vec![
                ws("e", "v1", "dev", "2026-01-05T09:30:00Z", ready()),
                ws("x", "v1", "dev", "2026-01-05T10:10:00Z", ready()),
                ws("y", "v1", "dev", "2026-01-05T10:20:00Z", ready()),
                ws(
                    "busy",
                    "v1",
                    "dev",
                    "2026-01-05T09:00:00Z",
                    building("b1", Transition::Stop, false),
                ),
            ],
            vec![delete("e", Expired), delete("x", Extraneous)],
            Counts {
                desired: 1,
                running: 2,
                ready: 2,
                expired: 1,
                ..Counts::default()
            },
        ),
        one_pool(
            "failed starts and stops are deleted, a failed delete is left, stopped ones go",
            NOW,
            pool(1),
            vec![
                ws("f-start", "v1", "dev", T0, failed(Transition::Start)),
                ws(
                    "f-stop",
                    "v1",
                    "dev",
                    "2026-01-04T00:00:00Z",
                    failed(Transition::Stop),
                ),
                ws("f-delete", "v1", "dev", T0, failed(Transition::Delete)),
                ws("stopped", "v1", "dev", T0, PrebuildState::Stopped),
            ],
            vec![
                delete("f-stop", Failed),
                delete("f-start", Failed),
                delete("stopped", Stopped),
                create("v1", "dev"),
            ],
            Counts {
                desired: 1,
                failed: 3,
                ..Counts::default()
            },
        ),
    ]
}

fn failure_cases() -> Vec<Case> {
    use DeleteReason::*;
    let failing_case = |name: &'static str,
                        now: &'static str,
                        failures: u32,
                        last: &'static str,
                        notified: bool,
                        settings: Settings,
                        actions: Vec<Action>,
                        counts: Counts| Case {
        name,
        now,
        settings,
        presets: vec![failing(
            preset("web", "v1", "dev", Some(pool(1))),
            failures,
            last,
            notified,
        )],
        workspaces: vec![],
        paused: false,
        actions,
        statuses: vec![status("web", "v1", "dev", counts)],
    };
    vec![
        failing_case(
            "one failure: no creation for one backoff",
            "2026-01-05T12:00:59Z",
            1,
            "2026-01-05T12:00:00Z",
            false,
            SETTINGS,
            vec![],
            Counts {
                desired: 1,
                consecutive_failures: 1,
                backing_off_until: Some("2026-01-05T12:01:00Z"),
                ..Counts::default()
            },
        ),
        failing_case(
            "one failure: creation resumes when the backoff ends",
            "2026-01-05T12:01:00Z",
            1,
            "2026-01-05T12:00:00Z",
            false,
            SETTINGS,
            vec![create("v1", "dev")],
            Counts {
                desired: 1,
                consecutive_failures: 1,
                ..Counts::default()
            },
        ),
        failing_case(
            "two failures: the backoff doubles",
            "2026-01-05T12:01:30Z",
            2,
            "2026-01-05T12:00:00Z",
            false,
            SETTINGS,
            vec![],
            Counts {
                desired: 1,
                consecutive_failures: 2,
                backing_off_until: Some("2026-01-05T12:02:00Z"),
                ..Counts::default()
            },
        ),
        failing_case(
            "hard limit reached: nothing created, admins notified",
            "2026-01-05T13:00:00Z",
            3,
            "2026-01-05T12:00:00Z",
            false,
            SETTINGS,
            vec![notify("web", "v1", "dev")],
            Counts {
                desired: 1,
                consecutive_failures: 3,
                hard_limited: true,
                ..Counts::default()
            },
        ),
        failing_case(
            "hard limit reached and already notified: silence",
            "2026-01-05T14:00:00Z",
            4,
            "2026-01-05T12:00:00Z",
            true,
            SETTINGS,
            vec![],
            Counts {
                desired: 1,
                consecutive_failures: 4,
                hard_limited: true,
                ..Counts::default()
            },
        ),
        failing_case(
            "hard limit while backing off: both reported",
            "2026-01-05T12:01:00Z",
            3,
            "2026-01-05T12:00:00Z",
            false,
            SETTINGS,
            vec![notify("web", "v1", "dev")],
            Counts {
                desired: 1,
                consecutive_failures: 3,
                hard_limited: true,
                backing_off_until: Some("2026-01-05T12:03:00Z"),
                ..Counts::default()
            },
        ),
        failing_case(
            "recovered: a success reset the failures, creation resumes",
            "2026-01-05T12:00:10Z",
            0,
            "2026-01-05T12:00:00Z",
            true,
            SETTINGS,
            vec![create("v1", "dev")],
            Counts {
                desired: 1,
                ..Counts::default()
            },
        ),
        failing_case(
            "a hard limit of 0 is no limit",
            "2026-01-05T14:00:00Z",
            10,
            "2026-01-05T12:00:00Z",
            false,
            Settings {
                backoff: Duration::from_secs(60),
                failure_hard_limit: 0,
            },
            vec![create("v1", "dev")],
            Counts {
                desired: 1,
                consecutive_failures: 10,
                ..Counts::default()
            },
        ),
        failing_case(
            "a backoff too long to represent means never",
            "2026-01-05T14:00:00Z",
            2,
            "2026-01-05T12:00:00Z",
            false,
            Settings {
                backoff: Duration::MAX,
                failure_hard_limit: 0,
            },
            vec![],
            Counts {
                desired: 1,
                consecutive_failures: 2,
                backing_off_until: Some(NEVER),
                ..Counts::default()
            },
        ),
        Case {
            name: "a hard-limited pool still deletes what it cannot use",
            now: NOW,
            settings: SETTINGS,
            presets: vec![failing(
                preset("web", "v1", "dev", Some(with_ttl(pool(2), 3600))),
                3,
                "2026-01-05T11:59:00Z",
                true,
            )],
            workspaces: vec![
                ws("old", "v1", "dev", T0, ready()),
                ws(
                    "broken",
                    "v1",
                    "dev",
                    "2026-01-05T11:30:00Z",
                    failed(Transition::Start),
                ),
            ],
            paused: false,
            actions: vec![delete("broken", Failed), delete("old", Expired)],
            statuses: vec![status(
                "web",
                "v1",
                "dev",
                Counts {
                    desired: 2,
                    expired: 1,
                    failed: 1,
                    consecutive_failures: 3,
                    hard_limited: true,
                    backing_off_until: Some("2026-01-05T12:02:00Z"),
                    ..Counts::default()
                },
            )],
        },
    ]
}

fn version_cases() -> Vec<Case> {
    use DeleteReason::*;
    vec![
        Case {
            name: "an inactive version is wound down, the active one filled",
            now: NOW,
            settings: SETTINGS,
            presets: vec![
                inactive(preset("web", "v1", "dev", Some(pool(2)))),
                preset("web", "v2", "dev", Some(pool(2))),
            ],
            workspaces: vec![
                ws("run", "v1", "dev", T0, ready()),
                ws("pending", "v1", "dev", T0, building("p1", Transition::Start, true)),
                ws("started", "v1", "dev", T0, building("s1", Transition::Start, false)),
                ws("pending-delete", "v1", "dev", T0, building("d1", Transition::Delete, true)),
                ws("held", "v1", "dev", T0, held("h1")),
                ws("failed-start", "v1", "dev", "2026-01-05T11:00:00Z", failed(Transition::Start)),
                ws("failed-delete", "v1", "dev", T0, failed(Transition::Delete)),
                ws("stopped", "v1", "dev", "2026-01-04T00:00:00Z", PrebuildState::Stopped),
                ws("new", "v2", "dev", T0, ready()),
            ],
            paused: false,
            actions: vec![
                cancel("p1", "pending"),
                delete("stopped", InactiveVersion),
                delete("run", InactiveVersion),
                delete("failed-start", InactiveVersion),
                create("v2", "dev"),
            ],
            statuses: vec![status(
                "web",
                "v2",
                "dev",
                Counts {
                    desired: 2,
                    running: 1,
                    ready: 1,
                    ..Counts::default()
                },
            )],
        },
        Case {
            name: "a version absent from the snapshot counts as inactive",
            now: NOW,
            settings: SETTINGS,
            presets: vec![preset("web", "v2", "dev", Some(pool(0)))],
            workspaces: vec![ws("orphan", "v0", "dev", T0, ready())],
            paused: false,
            actions: vec![delete("orphan", InactiveVersion)],
            statuses: vec![status("web", "v2", "dev", Counts::default())],
        },
        Case {
            name: "a preset without prebuilds, or undeclared, in an active version: no status, extraneous",
            now: NOW,
            settings: SETTINGS,
            presets: vec![preset("web", "v1", "plain", None)],
            workspaces: vec![
                ws("a", "v1", "plain", T0, ready()),
                ws("b", "v1", "gone", "2026-01-04T00:00:00Z", unready()),
                ws("c", "v1", "gone", T0, building("c1", Transition::Start, true)),
            ],
            paused: false,
            actions: vec![delete("b", Extraneous), delete("a", Extraneous)],
            statuses: vec![],
        },
        Case {
            name: "several templates: statuses by template name then preset, actions by kind",
            now: NOW,
            settings: SETTINGS,
            presets: vec![
                preset("zeta", "z1", "small", Some(pool(1))),
                preset("alpha", "a1", "large", Some(pool(0))),
                preset("alpha", "a1", "big", Some(pool(1))),
                failing(preset("beta", "b1", "x", Some(pool(1))), 5, T0, false),
            ],
            workspaces: vec![ws("a-extra", "a1", "large", T0, ready())],
            paused: false,
            actions: vec![
                delete("a-extra", Extraneous),
                create("a1", "big"),
                create("z1", "small"),
                notify("beta", "b1", "x"),
            ],
            statuses: vec![
                status(
                    "alpha",
                    "a1",
                    "big",
                    Counts {
                        desired: 1,
                        ..Counts::default()
                    },
                ),
                status(
                    "alpha",
                    "a1",
                    "large",
                    Counts {
                        running: 1,
                        ready: 1,
                        ..Counts::default()
                    },
                ),
                status(
                    "beta",
                    "b1",
                    "x",
                    Counts {
                        desired: 1,
                        consecutive_failures: 5,
                        hard_limited: true,
                        ..Counts::default()
                    },
                ),
                status(
                    "zeta",
                    "z1",
                    "small",
                    Counts {
                        desired: 1,
                        ..Counts::default()
                    },
                ),
            ],
        },
        Case {
            name: "a definition the provider would refuse falls back to instances, with the problem",
            now: NOW,
            settings: SETTINGS,
            presets: vec![
                preset("web", "v1", "tz", Some(scheduled(1, "Mars/Olympus", &[("* * * * *", 5)]))),
                preset("web", "v1", "cron", Some(scheduled(1, "UTC", &[("* * * * *", 5), ("0 9 * * *", 7)]))),
            ],
            workspaces: vec![],
            paused: false,
            actions: vec![create("v1", "cron"), create("v1", "tz")],
            statuses: vec![
                status(
                    "web",
                    "v1",
                    "cron",
                    Counts {
                        desired: 1,
                        problem: Some(
                            "cron `0 9 * * *`: the minute field must be `*` (schedules cover whole hours), not `0`: schedules ignored",
                        ),
                        ..Counts::default()
                    },
                ),
                status(
                    "web",
                    "v1",
                    "tz",
                    Counts {
                        desired: 1,
                        problem: Some("time zone `Mars/Olympus` is unknown: schedules ignored"),
                        ..Counts::default()
                    },
                ),
            ],
        },
        one_pool(
            "negative instances read as none",
            NOW,
            pool(-3),
            vec![ws("a", "v1", "dev", T0, ready())],
            vec![delete("a", Extraneous)],
            Counts {
                running: 1,
                ready: 1,
                ..Counts::default()
            },
        ),
    ]
}

fn pause_cases() -> Vec<Case> {
    vec![Case {
        name: "paused: statuses as usual, no action at all",
        now: NOW,
        settings: SETTINGS,
        presets: vec![
            failing(
                preset("web", "v1", "dev", Some(with_ttl(pool(1), 3600))),
                3,
                T0,
                false,
            ),
            inactive(preset("web", "v0", "dev", Some(pool(1)))),
            preset("web", "v1", "more", Some(pool(2))),
        ],
        workspaces: vec![
            ws("expired", "v1", "dev", T0, ready()),
            ws("inactive", "v0", "dev", T0, ready()),
            ws(
                "pending",
                "v0",
                "dev",
                T0,
                building("p1", Transition::Start, true),
            ),
        ],
        paused: true,
        actions: vec![],
        statuses: vec![
            status(
                "web",
                "v1",
                "dev",
                Counts {
                    desired: 1,
                    expired: 1,
                    consecutive_failures: 3,
                    hard_limited: true,
                    paused: true,
                    ..Counts::default()
                },
            ),
            status(
                "web",
                "v1",
                "more",
                Counts {
                    desired: 2,
                    paused: true,
                    ..Counts::default()
                },
            ),
        ],
    }]
}

// ---- the prebuilds budget ----------------------------------------------

/// A pool's expected cost, and whether its quota episode was told.
fn costing(mut preset: PresetSnapshot, cost: Option<i64>, notified: bool) -> PresetSnapshot {
    preset.last_cost = cost;
    preset.quota_limited_notified = notified;
    preset
}

fn costs(mut workspace: PrebuiltWorkspace, cost: i64) -> PrebuiltWorkspace {
    workspace.daily_cost = Some(cost);
    workspace
}

fn quota_notice(limited: bool, tpl: &str, version: &str, preset: &str) -> Action {
    let (template_id, version_id, preset_name) =
        (format!("{tpl}-id"), version.to_string(), preset.to_string());
    if limited {
        Action::NotifyQuotaLimited {
            template_id,
            version_id,
            preset_name,
        }
    } else {
        Action::NotifyQuotaRecovered {
            template_id,
            version_id,
            preset_name,
        }
    }
}

/// Pool `dev` of `web` v1 wanting 3, at `cost` a day each (when known),
/// with its episode `notified`.
fn pool_of_three(cost: Option<i64>, notified: bool) -> Vec<PresetSnapshot> {
    vec![costing(
        preset("web", "v1", "dev", Some(pool(3))),
        cost,
        notified,
    )]
}

/// (case, budget).
fn budget_cases() -> Vec<(Case, Option<i64>)> {
    let dev = |counts: Counts| {
        vec![status(
            "web",
            "v1",
            "dev",
            Counts {
                desired: 3,
                estimated_cost: Some(5),
                ..counts
            },
        )]
    };
    let running = |id: &str, cost: i64| costs(ws(id, "v1", "dev", T0, ready()), cost);
    vec![
        (
            Case {
                name: "a pool of 3 with room for 2: two created, limited, told once",
                presets: pool_of_three(Some(5), false),
                actions: vec![
                    create("v1", "dev"),
                    create("v1", "dev"),
                    quota_notice(true, "web", "v1", "dev"),
                ],
                statuses: dev(Counts {
                    quota_limited: true,
                    ..Counts::default()
                }),
                ..Case::default()
            },
            Some(10),
        ),
        (
            Case {
                name: "the two built and told: nothing more, still limited, not told again",
                presets: pool_of_three(Some(5), true),
                workspaces: vec![running("a", 5), running("b", 5)],
                statuses: dev(Counts {
                    running: 2,
                    ready: 2,
                    quota_limited: true,
                    ..Counts::default()
                }),
                ..Case::default()
            },
            Some(10),
        ),
        (
            Case {
                name: "a start waiting for its plan counts the pool's expected cost",
                presets: pool_of_three(Some(5), true),
                workspaces: vec![
                    running("a", 5),
                    ws(
                        "b",
                        "v1",
                        "dev",
                        T0,
                        building("b1", Transition::Start, true),
                    ),
                ],
                statuses: dev(Counts {
                    running: 1,
                    ready: 1,
                    in_progress: 1,
                    quota_limited: true,
                    ..Counts::default()
                }),
                ..Case::default()
            },
            Some(10),
        ),
        (
            Case {
                name: "the allowance raised: the third is created, recovery told",
                presets: pool_of_three(Some(5), true),
                workspaces: vec![running("a", 5), running("b", 5)],
                actions: vec![create("v1", "dev"), quota_notice(false, "web", "v1", "dev")],
                statuses: dev(Counts {
                    running: 2,
                    ready: 2,
                    ..Counts::default()
                }),
                ..Case::default()
            },
            Some(15),
        ),
        (
            Case {
                name: "recovered and told: nothing to tell",
                presets: pool_of_three(Some(5), false),
                workspaces: vec![running("a", 5), running("b", 5), running("c", 5)],
                statuses: dev(Counts {
                    running: 3,
                    ready: 3,
                    ..Counts::default()
                }),
                ..Case::default()
            },
            Some(15),
        ),
        (
            Case {
                name: "an allowance lowered below what runs deletes nothing",
                presets: pool_of_three(Some(5), false),
                workspaces: vec![running("a", 5), running("b", 5), running("c", 5)],
                statuses: dev(Counts {
                    running: 3,
                    ready: 3,
                    ..Counts::default()
                }),
                ..Case::default()
            },
            Some(0),
        ),
        (
            Case {
                name: "quotas no longer enforced: every creation, recovery told",
                presets: pool_of_three(Some(5), true),
                workspaces: vec![running("a", 5)],
                actions: vec![
                    create("v1", "dev"),
                    create("v1", "dev"),
                    quota_notice(false, "web", "v1", "dev"),
                ],
                statuses: dev(Counts {
                    running: 1,
                    ready: 1,
                    ..Counts::default()
                }),
                ..Case::default()
            },
            None,
        ),
        (
            Case {
                name: "a cost of 0 fits a budget of 0",
                presets: pool_of_three(Some(0), false),
                actions: vec![
                    create("v1", "dev"),
                    create("v1", "dev"),
                    create("v1", "dev"),
                ],
                statuses: vec![status(
                    "web",
                    "v1",
                    "dev",
                    Counts {
                        desired: 3,
                        estimated_cost: Some(0),
                        ..Counts::default()
                    },
                )],
                ..Case::default()
            },
            Some(0),
        ),
        (
            Case {
                name: "an unknown cost: one at a time, its plan tells",
                presets: pool_of_three(None, false),
                actions: vec![create("v1", "dev")],
                statuses: vec![status(
                    "web",
                    "v1",
                    "dev",
                    Counts {
                        desired: 3,
                        ..Counts::default()
                    },
                )],
                ..Case::default()
            },
            Some(10),
        ),
        (
            Case {
                name: "an unknown cost while one builds: wait for its plan",
                presets: pool_of_three(None, false),
                workspaces: vec![ws(
                    "a",
                    "v1",
                    "dev",
                    T0,
                    building("a1", Transition::Start, false),
                )],
                statuses: vec![status(
                    "web",
                    "v1",
                    "dev",
                    Counts {
                        desired: 3,
                        in_progress: 1,
                        ..Counts::default()
                    },
                )],
                ..Case::default()
            },
            Some(10),
        ),
        (
            Case {
                name: "an inactive version's workspace still counts until it is gone",
                presets: vec![
                    inactive(preset("web", "v0", "dev", Some(pool(3)))),
                    costing(preset("web", "v1", "dev", Some(pool(3))), Some(5), false),
                ],
                workspaces: vec![costs(ws("old", "v0", "dev", T0, ready()), 5)],
                actions: vec![
                    delete("old", DeleteReason::InactiveVersion),
                    create("v1", "dev"),
                    quota_notice(true, "web", "v1", "dev"),
                ],
                statuses: dev(Counts {
                    quota_limited: true,
                    ..Counts::default()
                }),
                ..Case::default()
            },
            Some(10),
        ),
        (
            Case {
                name: "pools take the budget in status order, not the snapshot's",
                presets: vec![
                    costing(preset("beta", "vb", "b", Some(pool(2))), Some(3), false),
                    costing(preset("alpha", "va", "a", Some(pool(2))), Some(3), false),
                ],
                actions: vec![
                    create("va", "a"),
                    create("va", "a"),
                    quota_notice(true, "beta", "vb", "b"),
                ],
                statuses: vec![
                    status(
                        "alpha",
                        "va",
                        "a",
                        Counts {
                            desired: 2,
                            estimated_cost: Some(3),
                            ..Counts::default()
                        },
                    ),
                    status(
                        "beta",
                        "vb",
                        "b",
                        Counts {
                            desired: 2,
                            quota_limited: true,
                            estimated_cost: Some(3),
                            ..Counts::default()
                        },
                    ),
                ],
                ..Case::default()
            },
            Some(8),
        ),
        (
            Case {
                name: "paused: limited is still said, nothing done or told",
                presets: pool_of_three(Some(5), false),
                paused: true,
                statuses: dev(Counts {
                    quota_limited: true,
                    paused: true,
                    ..Counts::default()
                }),
                ..Case::default()
            },
            Some(5),
        ),
    ]
}

#[test]
fn the_prebuilds_budget_limits_creations_and_is_told_once_per_episode() {
    for (case, budget) in budget_cases() {
        check_with_budget(case, budget);
    }
}

#[test]
fn schedules_in_new_york_across_daylight_saving() {
    new_york_cases().into_iter().for_each(check);
}

#[test]
fn schedules_in_paris_across_daylight_saving() {
    paris_cases().into_iter().for_each(check);
}

#[test]
fn pools_fill_expire_and_shrink() {
    pool_cases().into_iter().for_each(check);
}

#[test]
fn failures_back_off_and_hit_the_hard_limit() {
    failure_cases().into_iter().for_each(check);
}

#[test]
fn versions_and_undeclared_presets() {
    version_cases().into_iter().for_each(check);
}

#[test]
fn pause_stops_every_action() {
    pause_cases().into_iter().for_each(check);
}

/// A deprecated template's pool makes no new prebuild (issue 50): what it
/// has stays, and its status still says how many it would want.
#[test]
fn a_deprecated_templates_pool_stops_growing() {
    let mut deprecated = preset("web", "v1", "dev", Some(pool(3)));
    deprecated.template_deprecated = true;
    check(Case {
        name: "a deprecated template's pool keeps what it has and makes none",
        presets: vec![deprecated],
        workspaces: vec![ws("a", "v1", "dev", T0, ready())],
        statuses: vec![status(
            "web",
            "v1",
            "dev",
            Counts {
                desired: 3,
                running: 1,
                ready: 1,
                ..Counts::default()
            },
        )],
        ..Case::default()
    });
}
