//! `abode_workspace_preset`: a named set of parameter values users can pick, and
//! optionally how many prebuilt workspaces of it the platform keeps ready, when,
//! and for how long. The provider only validates and echoes the declaration; the
//! platform reads presets from the plan to act on them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tf_provider::schema::{Block, NestedBlock};
use tf_provider::value::{serde_as_vec, Value};
use tf_provider::Diagnostics;

use abode_contract::cron::validate_schedules;

use crate::plumbing::DataSourceType;
use crate::schema::{block, computed, known, number, optional, required, string, string_map};

/// The allowed prebuild lifetimes: 0 (never expire) or one hour to one year.
pub(crate) const TTL_MIN_SECONDS: i64 = 3600;
pub(crate) const TTL_MAX_SECONDS: i64 = 31_536_000;

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct ExpirationState {
    ttl: Value<i64>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct ScheduleState {
    cron: Value<String>,
    instances: Value<i64>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct SchedulingState {
    timezone: Value<String>,
    schedule: Value<Vec<Value<ScheduleState>>>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct PrebuildsState {
    instances: Value<i64>,
    #[serde(with = "serde_as_vec")]
    expiration_policy: Value<ExpirationState>,
    #[serde(with = "serde_as_vec")]
    scheduling: Value<SchedulingState>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct PresetState {
    id: Value<String>,
    name: Value<String>,
    parameters: Value<BTreeMap<String, Value<String>>>,
    #[serde(with = "serde_as_vec")]
    prebuilds: Value<PrebuildsState>,
}

/// Every problem of a preset's declaration that is known yet, as one message each.
pub(crate) fn preset_problems(preset: &PresetState) -> Vec<String> {
    let name = known(&preset.name).map(String::as_str).unwrap_or("?");
    let mut problems = Vec::new();
    let Some(prebuilds) = known(&preset.prebuilds) else {
        return problems;
    };
    if let Some(instances) = known(&prebuilds.instances) {
        if *instances < 0 {
            problems.push(format!(
                "preset `{name}`: prebuilds instances must be 0 or more, not {instances}"
            ));
        }
    }
    if let Some(ttl) = known(&prebuilds.expiration_policy).and_then(|policy| known(&policy.ttl)) {
        if *ttl != 0 && !(TTL_MIN_SECONDS..=TTL_MAX_SECONDS).contains(ttl) {
            problems.push(format!(
                "preset `{name}`: expiration_policy ttl must be 0 (never) or between \
                 {TTL_MIN_SECONDS} and {TTL_MAX_SECONDS} seconds, not {ttl}"
            ));
        }
    }
    if let Some(scheduling) = known(&prebuilds.scheduling) {
        if let Some(timezone) = known(&scheduling.timezone) {
            if timezone.parse::<chrono_tz::Tz>().is_err() {
                problems.push(format!(
                    "preset `{name}`: timezone `{timezone}` is not an IANA time zone name such as Europe/Paris"
                ));
            }
        }
        let schedules: Vec<&ScheduleState> = known(&scheduling.schedule)
            .into_iter()
            .flatten()
            .filter_map(known)
            .collect();
        for schedule in &schedules {
            if let Some(instances) = known(&schedule.instances) {
                if *instances < 0 {
                    problems.push(format!(
                        "preset `{name}`: schedule instances must be 0 or more, not {instances}"
                    ));
                }
            }
        }
        let crons: Option<Vec<String>> = schedules
            .iter()
            .map(|schedule| known(&schedule.cron).cloned())
            .collect();
        if let Some(crons) = crons {
            if let Err(err) = validate_schedules(&crons) {
                problems.push(format!("preset `{name}`: {err}"));
            }
        }
    }
    problems
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PresetDataSource;

fn report(diags: &mut Diagnostics, preset: &PresetState) -> bool {
    let problems = preset_problems(preset);
    for problem in &problems {
        diags.root_error_short(problem.clone());
    }
    problems.is_empty()
}

impl DataSourceType for PresetDataSource {
    type State = PresetState;

    fn block(&self) -> Block {
        let schedule = block(
            "During the hours this schedule matches, keep `instances` prebuilt workspaces \
             instead of the preset's default.",
            vec![
                (
                    "cron",
                    required(
                        string(),
                        "Five cron fields, minute hour day-of-month month day-of-week; the \
                         minute must be `*`. Schedules of one preset must not overlap.",
                    ),
                ),
                (
                    "instances",
                    required(number(), "Prebuilt workspaces to keep (>= 0)."),
                ),
            ],
        );
        let mut scheduling = block(
            "When the number of prebuilt workspaces changes with the time of day.",
            vec![(
                "timezone",
                required(
                    string(),
                    "The IANA time zone the schedules are read in, e.g. Europe/Paris.",
                ),
            )],
        );
        scheduling
            .blocks
            .insert("schedule".into(), NestedBlock::List(schedule));
        let mut prebuilds = block(
            "Keep prebuilt workspaces of this preset ready to be claimed.",
            vec![(
                "instances",
                required(number(), "How many prebuilt workspaces to keep (>= 0)."),
            )],
        );
        prebuilds.blocks.insert(
            "expiration_policy".into(),
            NestedBlock::Optional(block(
                "When unclaimed prebuilt workspaces are replaced.",
                vec![(
                    "ttl",
                    required(
                        number(),
                        "Seconds an unclaimed prebuilt workspace lives: 0 (forever) or 3600 to \
                         31536000.",
                    ),
                )],
            )),
        );
        prebuilds
            .blocks
            .insert("scheduling".into(), NestedBlock::Optional(scheduling));
        let mut preset = block(
            "A named choice of parameter values, optionally with prebuilt workspaces.",
            vec![
                ("id", computed(string(), "Same as `name`.")),
                (
                    "name",
                    required(string(), "The preset's name shown to users."),
                ),
                (
                    "parameters",
                    optional(string_map(), "Parameter values by parameter name."),
                ),
            ],
        );
        preset
            .blocks
            .insert("prebuilds".into(), NestedBlock::Optional(prebuilds));
        preset
    }

    fn check(&self, diags: &mut Diagnostics, config: &Self::State) {
        report(diags, config);
    }

    fn read(&self, diags: &mut Diagnostics, config: Self::State) -> Option<Self::State> {
        if !report(diags, &config) {
            return None;
        }
        let mut state = config;
        state.id = state.name.clone();
        Some(state)
    }
}
