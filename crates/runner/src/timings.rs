//! What a run measures of its own time: each stage it ran (work dir,
//! snapshots, `init`, `plan`, `apply`, what the apply made recorded) and,
//! from Terraform's `-json` events, each resource's refresh or read during
//! the plan and its change during the apply.
//!
//! Everything is measured here on the run's monotonic clock, as offsets
//! from the run's start; a resource's duration is the difference of
//! Terraform's own event timestamps. The host anchors the offsets on the
//! server's clock when it is told them (`elapsed_us` is how long ago the
//! run started, as the report leaves this machine).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use abode_contract::timings::{ResourcePhase, Stage};
use abode_terraform::run::{OutputLine, Stream};
use serde::{Deserialize, Serialize};

/// One stage a run passed, in microseconds from the run's start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageSpan {
    #[serde(with = "stage_name")]
    pub stage: Stage,
    pub start_us: u64,
    pub end_us: u64,
}

/// One resource's time in Terraform's plan or apply, in microseconds from
/// the run's start (the end is the start plus Terraform's own duration).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceSpan {
    #[serde(with = "phase_name")]
    pub phase: ResourcePhase,
    pub address: String,
    /// Terraform's action: `refresh`, `read`, `create`, `update`, `delete`...
    pub action: String,
    pub start_us: u64,
    pub end_us: u64,
}

/// A run's stages and resources, with how long ago it started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunTimings {
    #[serde(default)]
    pub stages: Vec<StageSpan>,
    #[serde(default)]
    pub resources: Vec<ResourceSpan>,
    /// Microseconds since the run started, when this was told.
    #[serde(default)]
    pub elapsed_us: u64,
}

/// The run's clock and what it measured so far.
pub struct Stopwatch {
    base: Instant,
    timings: Mutex<RunTimings>,
}

impl Default for Stopwatch {
    fn default() -> Self {
        Stopwatch::new()
    }
}

impl Stopwatch {
    pub fn new() -> Stopwatch {
        Stopwatch {
            base: Instant::now(),
            timings: Mutex::new(RunTimings::default()),
        }
    }

    /// Microseconds from the run's start to `at`.
    pub fn offset(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_micros()).unwrap_or(u64::MAX)
    }

    /// A stage that started at `start` and ended now.
    pub fn stage(&self, stage: Stage, start: Instant) {
        let span = StageSpan {
            stage,
            start_us: self.offset(start),
            end_us: self.offset(Instant::now()),
        };
        if let Ok(mut timings) = self.timings.lock() {
            timings.stages.push(span);
        }
    }

    fn resource(&self, span: ResourceSpan) {
        if let Ok(mut timings) = self.timings.lock() {
            timings.resources.push(span);
        }
    }

    /// What was measured, told now.
    pub fn report(&self) -> RunTimings {
        let mut report = self
            .timings
            .lock()
            .map(|timings| timings.clone())
            .unwrap_or_default();
        report.elapsed_us = self.offset(Instant::now());
        report
    }

    /// A reader of one Terraform command's `-json` lines for `phase`.
    pub fn events(&self, phase: ResourcePhase) -> ResourceEvents<'_> {
        ResourceEvents {
            watch: self,
            phase,
            started: HashMap::new(),
        }
    }
}

/// Pairs a resource's start event with its end, within one command.
pub struct ResourceEvents<'a> {
    watch: &'a Stopwatch,
    phase: ResourcePhase,
    /// By address: when the start arrived here, Terraform's timestamp of
    /// it (µs) and the action.
    started: HashMap<String, (u64, Option<i64>, String)>,
}

impl ResourceEvents<'_> {
    /// Reads one output line, arrived at `at`.
    pub fn line(&mut self, line: &OutputLine, at: Instant) {
        // Only a hook's start or end is parsed: most lines are neither.
        let text = line.text.as_str();
        if line.stream != Stream::Stdout
            || !text.trim_start().starts_with('{')
            || !(text.contains("_start\"")
                || text.contains("_complete\"")
                || text.contains("_errored\""))
        {
            return;
        }
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line.text.trim()) else {
            return;
        };
        let kind = value.get("type").and_then(|k| k.as_str()).unwrap_or("");
        let starts = matches!(kind, "refresh_start" | "apply_start");
        let ends = matches!(
            kind,
            "refresh_complete" | "apply_complete" | "apply_errored"
        );
        if !starts && !ends {
            return;
        }
        let Some(address) = value
            .pointer("/hook/resource/addr")
            .and_then(|a| a.as_str())
            .map(str::to_string)
        else {
            return;
        };
        let stamp = value
            .get("@timestamp")
            .and_then(|t| t.as_str())
            .and_then(timestamp_us);
        let here = self.watch.offset(at);
        if starts {
            let action = if kind == "refresh_start" {
                "refresh".to_string()
            } else {
                value
                    .pointer("/hook/action")
                    .and_then(|a| a.as_str())
                    .unwrap_or("apply")
                    .to_string()
            };
            self.started.insert(address, (here, stamp, action));
            return;
        }
        let Some((start_us, start_stamp, action)) = self.started.remove(&address) else {
            return;
        };
        let took = match (start_stamp, stamp) {
            (Some(from), Some(to)) if to >= from => u64::try_from(to - from).unwrap_or(0),
            _ => here.saturating_sub(start_us),
        };
        self.watch.resource(ResourceSpan {
            phase: self.phase,
            address,
            action,
            start_us,
            end_us: start_us.saturating_add(took),
        });
    }
}

/// Microseconds since the epoch of an RFC 3339 UTC timestamp as Terraform
/// writes it (`2026-12-05T08:45:08.027045Z`); none for anything else.
pub fn timestamp_us(text: &str) -> Option<i64> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date = date.splitn(3, '-');
    let year: i64 = date.next()?.parse().ok()?;
    let month: i64 = date.next()?.parse().ok()?;
    let day: i64 = date.next()?.parse().ok()?;
    let (clock, fraction) = match time.split_once('.') {
        Some((clock, fraction)) => (clock, fraction),
        None => (time, ""),
    };
    let mut clock = clock.splitn(3, ':');
    let hour: i64 = clock.next()?.parse().ok()?;
    let minute: i64 = clock.next()?.parse().ok()?;
    let second: i64 = clock.next()?.parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if !fraction.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let micros: i64 = format!("{:0<6}", fraction.get(..6).unwrap_or(fraction))
        .parse()
        .ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hour) * 60 + minute) * 60_000_000 + second * 1_000_000 + micros)
}

mod stage_name {
    use abode_contract::timings::Stage;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(stage: &Stage, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(stage.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Stage, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

mod phase_name {
    use abode_contract::timings::ResourcePhase;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        phase: &ResourcePhase,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(phase.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<ResourcePhase, D::Error> {
        let name = String::deserialize(deserializer)?;
        ResourcePhase::named(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown resource phase `{name}`")))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn terraform_timestamps_read_to_the_microsecond() {
        assert_eq!(timestamp_us("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            timestamp_us("2026-12-05T08:45:08.027314Z").unwrap()
                - timestamp_us("2026-12-05T08:45:08.027045Z").unwrap(),
            269
        );
        assert_eq!(
            timestamp_us("2000-03-01T00:00:01.5Z"),
            Some(951_868_801_500_000)
        );
        assert_eq!(timestamp_us("yesterday"), None);
        assert_eq!(timestamp_us("2026-13-05T08:45:08Z"), None);
    }

    #[test]
    fn a_resources_start_and_end_make_one_span_of_terraforms_duration() {
        let watch = Stopwatch::new();
        let mut events = watch.events(ResourcePhase::Apply);
        let line = |text: &str| OutputLine {
            stream: Stream::Stdout,
            text: text.into(),
        };
        let now = Instant::now();
        events.line(&line(r#"{"@timestamp":"2026-12-05T08:45:08.027045Z","type":"apply_start","hook":{"resource":{"addr":"terraform_data.c"},"action":"create"}}"#), now);
        events.line(&line(r#"{"@timestamp":"2026-12-05T08:45:08.027314Z","type":"apply_complete","hook":{"resource":{"addr":"terraform_data.c"},"action":"create"}}"#), now);
        events.line(
            &line(r#"{"type":"apply_complete","hook":{"resource":{"addr":"never.started"}}}"#),
            now,
        );
        let report = watch.report();
        assert_eq!(report.resources.len(), 1);
        let span = &report.resources[0];
        assert_eq!(
            (span.address.as_str(), span.action.as_str()),
            ("terraform_data.c", "create")
        );
        assert_eq!(span.end_us - span.start_us, 269);
        let wire = serde_json::to_string(&report).unwrap();
        assert_eq!(serde_json::from_str::<RunTimings>(&wire).unwrap(), report);
    }
}
