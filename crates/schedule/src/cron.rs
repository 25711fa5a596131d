//! Autostart schedules: a 5-field, minute-level cron read in an IANA time
//! zone. The cron grammar and its daylight-saving rules come from `croner`
//! (POSIX/Vixie semantics: Sunday is 0 or 7, day-of-month and day-of-week
//! match when either does); this module only checks the shape Abode accepts
//! and keeps `croner` out of the public API.
//!
//! Around a daylight-saving change, a time that does not exist (02:30 on a
//! spring-forward day) fires at the first minute after the gap, and a time
//! that happens twice (02:30 on a fall-back day) fires once, the first time.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;

/// Why a schedule cannot be used; the message is one line, fit for the CLI.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "cron `{cron}` has {fields} fields; expected 5: minute hour day-of-month month day-of-week"
    )]
    Fields { cron: String, fields: usize },
    #[error("cron `{cron}`: {reason}")]
    Cron { cron: String, reason: String },
    #[error("cron `{0}` never fires")]
    Never(String),
    #[error("unknown time zone `{0}`: expected an IANA name such as Europe/Paris or UTC")]
    Timezone(String),
}

/// A checked autostart schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
    timezone: Tz,
}

/// Checks a schedule the way the scheduler will read it (for
/// `abode schedule start WS "CRON" --timezone TZ`).
pub fn validate_schedule(cron: &str, timezone: &str) -> Result<(), ScheduleError> {
    Schedule::parse(cron, timezone).map(|_| ())
}

impl Schedule {
    pub fn parse(cron: &str, timezone: &str) -> Result<Schedule, ScheduleError> {
        let fields = cron.split_whitespace().count();
        if fields != 5 {
            return Err(ScheduleError::Fields {
                cron: cron.to_string(),
                fields,
            });
        }
        let timezone =
            Tz::from_str(timezone).map_err(|_| ScheduleError::Timezone(timezone.to_string()))?;
        let cron_pattern = parse(cron).map_err(|error| ScheduleError::Cron {
            cron: cron.to_string(),
            reason: explain(cron, &error),
        })?;
        let schedule = Schedule {
            cron: cron_pattern,
            timezone,
        };
        // From a fixed time, so that the answer does not depend on the clock.
        let since_2000 = DateTime::<Utc>::from_timestamp(946_684_800, 0).unwrap_or_default();
        if schedule.next_after(since_2000).is_none() {
            return Err(ScheduleError::Never(cron.to_string()));
        }
        Ok(schedule)
    }

    pub fn timezone(&self) -> Tz {
        self.timezone
    }

    /// The first occurrence strictly after `after`, if the pattern ever
    /// matches again (`0 0 30 2 *` never does).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let local = after.with_timezone(&self.timezone);
        self.cron
            .find_next_occurrence(&local, false)
            .ok()
            .map(|next| next.with_timezone(&Utc))
    }
}

/// The years a schedule can fire in. `croner` always has a year field and
/// reads a missing one as its whole range (5,000 years, set one by one: most
/// of a parse's time), so Abode hands it this range instead, with the
/// seconds field (always 0) around the owner's five fields.
const YEARS: &str = "2000-2199";

fn parse(cron: &str) -> Result<Cron, croner::errors::CronError> {
    CronParser::builder()
        .seconds(Seconds::Required)
        .year(Year::Required)
        .build()
        .parse(&format!("0 {cron} {YEARS}"))
}

const FIELDS: [(&str, &str); 5] = [
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day-of-month", "1-31"),
    ("month", "1-12 or jan-dec"),
    ("day-of-week", "0-7 or sun-sat"),
];

/// Names the field `croner` refused, which its messages do not say: the first
/// field that fails on its own, every other field `*`.
fn explain(cron: &str, error: &croner::errors::CronError) -> String {
    let fields: Vec<&str> = cron.split_whitespace().collect();
    let culprit = (0..fields.len()).find(|&i| {
        let alone: Vec<&str> = (0..fields.len())
            .map(|j| if i == j { fields[j] } else { "*" })
            .collect();
        parse(&alone.join(" ")).is_err()
    });
    match culprit.and_then(|i| Some((fields.get(i)?, FIELDS.get(i)?))) {
        Some((text, (name, range))) => format!("the {name} field `{text}` is not valid ({range})"),
        None => one_line(&error.to_string()),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
