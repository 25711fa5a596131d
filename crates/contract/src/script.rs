//! What an `abode_script` may say, judged alike by the provider (a bad
//! cron, a timeout of 0 or less, a script that never runs fail the plan),
//! the platform's build (a script whose `agent_id` names no agent of the
//! plan is refused before anything is applied), the platform reading a
//! state, and the agent (which runs the scripts, their cron read here).
//!
//! A script's cron has six fields, seconds first (as Coder's
//! `coder_script`): `second minute hour day-of-month month day-of-week`,
//! read in UTC.

use chrono::{DateTime, Datelike, NaiveDateTime, Timelike};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cron::{parse_field, CronError, FieldSpec, DAY_OF_MONTH, DAY_OF_WEEK, HOUR, MONTH};

/// How long a stop script may run when its `timeout` is not set (as the
/// agent's `shutdown_timeout`).
pub const DEFAULT_STOP_TIMEOUT_SECONDS: i64 = 300;

/// The longest display name.
pub const MAX_DISPLAY_NAME: usize = 64;

/// One `abode_script` as the agent runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScriptDefinition {
    /// Names the script (its log, its line in `abode scripts`); one per agent.
    pub display_name: String,
    pub script: String,
    #[serde(default)]
    pub run_on_start: bool,
    #[serde(default)]
    pub run_on_stop: bool,
    /// Six fields, seconds first, read in UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    #[serde(default)]
    pub start_blocks_login: bool,
    /// Seconds a run may take before the agent kills it (more than 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i64>,
    /// Where its output goes: absolute, or relative to the agent's log
    /// directory; by default `abode-script-<owner>-<ws>-<agent>-<name>.log`
    /// there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_path: Option<String>,
}

/// One problem of a script's attributes: the attribute and a line.
pub type Problem = (&'static str, String);

impl ScriptDefinition {
    /// A script read from its resource's attributes (a state's or a plan's).
    pub fn from_attributes(attributes: &Value) -> Result<ScriptDefinition, String> {
        let text = |name: &str| {
            attributes
                .get(name)
                .and_then(Value::as_str)
                .filter(|text| !text.is_empty())
                .map(String::from)
        };
        let flag = |name: &str| attributes.get(name).and_then(Value::as_bool) == Some(true);
        let definition = ScriptDefinition {
            display_name: text("display_name").unwrap_or_default(),
            script: text("script").unwrap_or_default(),
            run_on_start: flag("run_on_start"),
            run_on_stop: flag("run_on_stop"),
            cron: text("cron"),
            start_blocks_login: flag("start_blocks_login"),
            timeout_seconds: attributes.get("timeout").and_then(Value::as_i64),
            log_path: text("log_path"),
        };
        match definition.problems().into_iter().next() {
            Some((_, problem)) => Err(problem),
            None => Ok(definition),
        }
    }

    /// When it runs: `start`, `stop`, `cron` joined by `+`.
    pub fn runs_on(&self) -> String {
        let on = [
            (self.run_on_start, "start"),
            (self.run_on_stop, "stop"),
            (self.cron.is_some(), "cron"),
        ];
        let on: Vec<&str> = on
            .iter()
            .filter(|(yes, _)| *yes)
            .map(|(_, word)| *word)
            .collect();
        on.join("+")
    }

    /// Everything wrong with this script, one line each.
    pub fn problems(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        if let Some(problem) = display_name_problem(&self.display_name) {
            problems.push(("display_name", problem));
        }
        if let Some(cron) = &self.cron {
            if let Err(error) = ScriptCron::parse(cron) {
                problems.push(("cron", format!("abode_script {error}")));
            }
        }
        if let Some(timeout) = self.timeout_seconds.filter(|timeout| *timeout <= 0) {
            problems.push((
                "timeout",
                format!("abode_script timeout must be more than 0 seconds, not {timeout}"),
            ));
        }
        if !self.run_on_start && !self.run_on_stop && self.cron.is_none() {
            problems.push((
                "run_on_start",
                "abode_script never runs: set run_on_start, run_on_stop or cron".to_string(),
            ));
        }
        if self.start_blocks_login && !self.run_on_start {
            problems.push((
                "start_blocks_login",
                "abode_script start_blocks_login needs run_on_start = true".to_string(),
            ));
        }
        if let Some(path) = &self.log_path {
            if path.split('/').any(|part| part == "..") {
                problems.push((
                    "log_path",
                    format!("abode_script log_path `{path}` may not contain `..`"),
                ));
            }
        }
        problems
    }
}

/// How much of a run's output the server keeps (its end).
pub const LOG_BYTES: usize = 64 * 1024;

/// What a run of a script may be in.
pub const RUN_STATES: [&str; 5] = ["running", "succeeded", "failed", "timed_out", "not_run"];

/// Why an agent's report of a run is refused, if it is.
pub fn run_report_problem(state: &str, exit_status: Option<i64>) -> Option<String> {
    if !RUN_STATES.contains(&state) {
        return Some(format!(
            "state `{state}` is not one of {}",
            RUN_STATES.join(", ")
        ));
    }
    exit_status
        .filter(|status| !(0..=255).contains(status))
        .map(|status| format!("exit_status {status} is not an exit status (0 to 255)"))
}

/// The last `max` bytes of `text`, cut at a character's boundary.
pub fn tail(text: &str, max: usize) -> &str {
    let from = text.len().saturating_sub(max);
    (from..text.len())
        .find(|i| text.is_char_boundary(*i))
        .map_or("", |start| &text[start..])
}

/// Why `name` cannot name a script, if it cannot.
pub fn display_name_problem(name: &str) -> Option<String> {
    if name.trim().is_empty() {
        return Some("abode_script display_name may not be empty".to_string());
    }
    if name.chars().count() > MAX_DISPLAY_NAME || name.chars().any(char::is_control) {
        return Some(format!(
            "abode_script display_name {name:?} must be at most {MAX_DISPLAY_NAME} printable characters"
        ));
    }
    None
}

/// A name fit for a file: letters, digits, `-`, `_` and `.` kept, the rest `_`.
pub fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

const SECOND: FieldSpec = FieldSpec {
    name: "second",
    min: 0,
    max: 59,
};
const MINUTE: FieldSpec = FieldSpec {
    name: "minute",
    min: 0,
    max: 59,
};

/// Why a script's cron is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptCronError {
    #[error(
        "cron `{cron}` has {count} fields; expected 6: second minute hour day-of-month month day-of-week"
    )]
    Fields { cron: String, count: usize },
    #[error(transparent)]
    Field(#[from] CronError),
}

/// A script's six-field cron.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptCron {
    seconds: Vec<bool>,
    minutes: Vec<bool>,
    hours: Vec<bool>,
    days_of_month: Vec<bool>,
    months: Vec<bool>,
    days_of_week: Vec<bool>,
    dom_restricted: bool,
    dow_restricted: bool,
}

impl ScriptCron {
    /// `second minute hour day-of-month month day-of-week`; each field
    /// `*`, `n`, `a-b`, `*/s`, `a-b/s` or a comma list of those.
    pub fn parse(cron: &str) -> Result<ScriptCron, ScriptCronError> {
        let fields: Vec<&str> = cron.split_whitespace().collect();
        if fields.len() != 6 {
            return Err(ScriptCronError::Fields {
                cron: cron.to_string(),
                count: fields.len(),
            });
        }
        let mut days_of_week = parse_field(cron, &DAY_OF_WEEK, fields[5])?;
        if days_of_week[7] {
            days_of_week[0] = true;
        }
        days_of_week.truncate(7);
        Ok(ScriptCron {
            seconds: parse_field(cron, &SECOND, fields[0])?,
            minutes: parse_field(cron, &MINUTE, fields[1])?,
            hours: parse_field(cron, &HOUR, fields[2])?,
            days_of_month: parse_field(cron, &DAY_OF_MONTH, fields[3])?,
            months: parse_field(cron, &MONTH, fields[4])?,
            days_of_week,
            dom_restricted: fields[3] != "*",
            dow_restricted: fields[5] != "*",
        })
    }

    /// Does the cron fire at `time` (to the second)?
    pub fn matches(&self, time: NaiveDateTime) -> bool {
        let dom = self.days_of_month[time.day() as usize];
        let dow = self.days_of_week[time.weekday().num_days_from_sunday() as usize];
        let day = match (self.dom_restricted, self.dow_restricted) {
            (true, true) => dom || dow,
            _ => dom && dow,
        };
        self.seconds[time.second() as usize]
            && self.minutes[time.minute() as usize]
            && self.hours[time.hour() as usize]
            && self.months[time.month() as usize]
            && day
    }

    /// Does the cron fire at `unix_seconds` (UTC)?
    pub fn matches_unix(&self, unix_seconds: i64) -> bool {
        DateTime::from_timestamp(unix_seconds, 0).is_some_and(|time| self.matches(time.naive_utc()))
    }
}

/// The `abode_script`s of a plan (`terraform show -json`) whose `agent_id`
/// names no `abode_agent` of the plan: one line each. A known id must be
/// an agent's planned id; an id not known yet must come from a reference
/// to an `abode_agent`.
pub fn unknown_agents_in_plan(plan: &Value) -> Vec<String> {
    let Some(changes) = plan.get("resource_changes").and_then(Value::as_array) else {
        return Vec::new();
    };
    let managed = |change: &&Value, kind: &str| {
        change.get("type").and_then(Value::as_str) == Some(kind)
            && change.get("mode").and_then(Value::as_str) == Some("managed")
    };
    let after = |change: &Value| {
        change
            .pointer("/change/after")
            .filter(|a| a.is_object())
            .cloned()
    };
    let agent_ids: Vec<String> = changes
        .iter()
        .filter(|change| managed(change, "abode_agent"))
        .filter_map(|change| after(change)?.get("id")?.as_str().map(String::from))
        .collect();
    let mut problems = Vec::new();
    for change in changes
        .iter()
        .filter(|change| managed(change, "abode_script"))
    {
        let Some(after) = after(change) else {
            continue; // deleted
        };
        let address = change
            .get("address")
            .and_then(Value::as_str)
            .unwrap_or("abode_script");
        match after.get("agent_id").and_then(Value::as_str) {
            Some(id) if agent_ids.iter().any(|known| known == id) => {}
            Some(id) => problems.push(format!(
                "{address}: agent_id `{id}` is the id of no abode_agent of this workspace"
            )),
            None => {
                let references = agent_references(plan, change);
                if !references
                    .iter()
                    .any(|r| r.starts_with("abode_agent.") || r.contains(".abode_agent."))
                {
                    problems.push(format!(
                        "{address}: agent_id must be an abode_agent's id (abode_agent.NAME.id)"
                    ));
                }
            }
        }
    }
    problems
}

/// What a script's `agent_id` refers to in its module's configuration
/// (empty when the configuration cannot be found: then nothing is judged).
fn agent_references(plan: &Value, change: &Value) -> Vec<String> {
    let module = change
        .get("module_address")
        .and_then(Value::as_str)
        .unwrap_or("");
    let found = || -> Option<Vec<String>> {
        let mut config = plan.pointer("/configuration/root_module")?;
        for call in crate::env::module_calls(module) {
            config = config.get("module_calls")?.get(call)?.get("module")?;
        }
        let name = change.get("name")?.as_str()?;
        let resource = config.get("resources")?.as_array()?.iter().find(|r| {
            r.get("mode").and_then(Value::as_str) == Some("managed")
                && r.get("type").and_then(Value::as_str) == Some("abode_script")
                && r.get("name").and_then(Value::as_str) == Some(name)
        })?;
        Some(
            resource
                .pointer("/expressions/agent_id/references")?
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
        )
    };
    // A configuration not found judges nothing: the state's check remains.
    found().unwrap_or_else(|| vec!["abode_agent.".to_string()])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn script(attributes: Value) -> Result<ScriptDefinition, String> {
        ScriptDefinition::from_attributes(&attributes)
    }

    #[test]
    fn scripts_must_run_sometime_with_a_good_cron_and_timeout() {
        let good = script(serde_json::json!({
            "display_name": "cache", "script": "true", "cron": "*/2 * * * * *", "timeout": 5
        }))
        .unwrap();
        assert_eq!(good.cron.as_deref(), Some("*/2 * * * * *"));
        assert_eq!(good.timeout_seconds, Some(5));
        let cases = [
            (
                serde_json::json!({"display_name": "x", "script": "true"}),
                "never runs",
            ),
            (
                serde_json::json!({"display_name": "x", "script": "true", "cron": "* * * * *"}),
                "abode_script cron `* * * * *` has 5 fields; expected 6",
            ),
            (
                serde_json::json!({"display_name": "x", "script": "true", "cron": "60 * * * * *"}),
                "abode_script cron `60 * * * * *`: invalid second field `60` (60 is outside 0-59)",
            ),
            (
                serde_json::json!({"display_name": "x", "script": "true", "run_on_start": true, "timeout": 0}),
                "more than 0 seconds, not 0",
            ),
            (
                serde_json::json!({"display_name": "x", "script": "true", "run_on_stop": true, "start_blocks_login": true}),
                "needs run_on_start",
            ),
            (
                serde_json::json!({"display_name": "", "script": "true", "run_on_start": true}),
                "may not be empty",
            ),
        ];
        for (attributes, expected) in cases {
            let error = script(attributes.clone()).unwrap_err();
            assert!(error.contains(expected), "{attributes}: {error}");
        }
    }

    #[test]
    fn six_field_crons_match_to_the_second() {
        let every_two = ScriptCron::parse("*/2 * * * * *").unwrap();
        assert!(every_two.matches_unix(1_000_000_000));
        assert!(!every_two.matches_unix(1_000_000_001));
        // 2026-03-02 is a Monday.
        let nine = ScriptCron::parse("30 0 9 * * 1-5").unwrap();
        let at = |text: &str| text.parse::<NaiveDateTime>().unwrap();
        assert!(nine.matches(at("2026-03-02T09:00:30")));
        assert!(!nine.matches(at("2026-03-02T09:00:31")));
        assert!(!nine.matches(at("2026-03-01T09:00:30")));
    }

    #[test]
    fn a_script_must_name_an_agent_of_the_plan() {
        let plan = serde_json::json!({
            "resource_changes": [
                {"address": "abode_agent.main", "mode": "managed", "type": "abode_agent", "name": "main",
                 "change": {"after": {"id": "a1"}}},
                {"address": "abode_script.known", "mode": "managed", "type": "abode_script", "name": "known",
                 "change": {"after": {"agent_id": "a1"}}},
                {"address": "abode_script.literal", "mode": "managed", "type": "abode_script", "name": "literal",
                 "change": {"after": {"agent_id": "nobody"}}},
                {"address": "abode_script.later", "mode": "managed", "type": "abode_script", "name": "later",
                 "change": {"after": {}}},
                {"address": "abode_script.other", "mode": "managed", "type": "abode_script", "name": "other",
                 "change": {"after": {}}}
            ],
            "configuration": {"root_module": {"resources": [
                {"mode": "managed", "type": "abode_script", "name": "later",
                 "expressions": {"agent_id": {"references": ["abode_agent.new.id", "abode_agent.new"]}}},
                {"mode": "managed", "type": "abode_script", "name": "other",
                 "expressions": {"agent_id": {"references": ["terraform_data.x.id", "terraform_data.x"]}}}
            ]}}
        });
        let problems = unknown_agents_in_plan(&plan);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("abode_script.literal: agent_id `nobody`"));
        assert!(problems[1].starts_with("abode_script.other: agent_id must be"));
    }
}
