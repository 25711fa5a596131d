//! Prebuild schedules: the five-field cron subset Abode accepts, the check
//! that two schedules of one preset never claim the same hour, and whether a
//! local time falls in a schedule.
//!
//! Schedules are hour-granular (the minute field must be `*`): a schedule says
//! how many prebuilt instances to keep during the hours it matches, so two
//! schedules matching one hour would contradict each other. The provider
//! validates them when a template is planned; the platform's reconciliation
//! matches them against the current hour, so both read one definition here.

use chrono::{Datelike, NaiveDateTime, Timelike};

/// Why a cron expression or a set of schedules is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    #[error("cron `{cron}` must have 5 fields (minute hour day-of-month month day-of-week), it has {count}")]
    FieldCount { cron: String, count: usize },
    #[error(
        "cron `{cron}`: the minute field must be `*` (schedules cover whole hours), not `{minute}`"
    )]
    Minute { cron: String, minute: String },
    #[error("cron `{cron}`: invalid {field} field `{value}` ({reason})")]
    Field {
        cron: String,
        field: &'static str,
        value: String,
        reason: String,
    },
    #[error("schedules `{first}` and `{second}` overlap: both match some hours, so the number of instances would be ambiguous")]
    Overlap { first: String, second: String },
}

/// The hours and days one schedule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    hours: Vec<bool>,
    days_of_month: Vec<bool>,
    months: Vec<bool>,
    days_of_week: Vec<bool>,
    /// Cron's rule: when both day fields are restricted, a day matches either.
    dom_restricted: bool,
    dow_restricted: bool,
}

pub(crate) struct FieldSpec {
    pub(crate) name: &'static str,
    pub(crate) min: u32,
    pub(crate) max: u32,
}

pub(crate) const HOUR: FieldSpec = FieldSpec {
    name: "hour",
    min: 0,
    max: 23,
};
pub(crate) const DAY_OF_MONTH: FieldSpec = FieldSpec {
    name: "day-of-month",
    min: 1,
    max: 31,
};
pub(crate) const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
};
pub(crate) const DAY_OF_WEEK: FieldSpec = FieldSpec {
    name: "day-of-week",
    min: 0,
    max: 7,
};

/// Parses one field (`*`, `n`, `a-b`, `*/s`, `a-b/s`, and comma lists of those)
/// into the values it matches, indexed from 0.
pub(crate) fn parse_field(
    cron: &str,
    spec: &FieldSpec,
    text: &str,
) -> Result<Vec<bool>, CronError> {
    let error = |reason: String| CronError::Field {
        cron: cron.to_string(),
        field: spec.name,
        value: text.to_string(),
        reason,
    };
    let number = |part: &str| -> Result<u32, CronError> {
        let value: u32 = part
            .parse()
            .map_err(|_| error(format!("`{part}` is not a number")))?;
        if value < spec.min || value > spec.max {
            return Err(error(format!(
                "{value} is outside {}-{}",
                spec.min, spec.max
            )));
        }
        Ok(value)
    };
    let mut matches = vec![false; spec.max as usize + 1];
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => {
                let step: u32 = step
                    .parse()
                    .map_err(|_| error(format!("step `{step}` is not a number")))?;
                if step == 0 {
                    return Err(error("a step must be at least 1".into()));
                }
                (range, step)
            }
            None => (item, 1),
        };
        let (start, end) = if range == "*" {
            (spec.min, spec.max)
        } else if let Some((start, end)) = range.split_once('-') {
            let (start, end) = (number(start)?, number(end)?);
            if start > end {
                return Err(error(format!("range {start}-{end} is backwards")));
            }
            (start, end)
        } else {
            let value = number(range)?;
            (value, if item.contains('/') { spec.max } else { value })
        };
        let mut value = start;
        while value <= end {
            matches[value as usize] = true;
            value += step;
        }
    }
    Ok(matches)
}

/// Validates a cron expression and returns what it matches.
pub fn validate_cron(cron: &str) -> Result<Schedule, CronError> {
    let fields: Vec<&str> = cron.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(CronError::FieldCount {
            cron: cron.to_string(),
            count: fields.len(),
        });
    }
    if fields[0] != "*" {
        return Err(CronError::Minute {
            cron: cron.to_string(),
            minute: fields[0].to_string(),
        });
    }
    let mut days_of_week = parse_field(cron, &DAY_OF_WEEK, fields[4])?;
    // 7 is another spelling of Sunday.
    if days_of_week[7] {
        days_of_week[0] = true;
    }
    days_of_week.truncate(7);
    Ok(Schedule {
        hours: parse_field(cron, &HOUR, fields[1])?,
        days_of_month: parse_field(cron, &DAY_OF_MONTH, fields[2])?,
        months: parse_field(cron, &MONTH, fields[3])?,
        days_of_week,
        dom_restricted: fields[2] != "*",
        dow_restricted: fields[4] != "*",
    })
}

impl Schedule {
    /// Does this schedule cover `local`, a wall-clock time in the schedule's
    /// time zone? Only its hour and day count (the minute field is always `*`);
    /// when both day fields are restricted, either one matching is enough, as
    /// in cron.
    pub fn matches(&self, local: NaiveDateTime) -> bool {
        // Indexes are in range by construction: hour 0-23, month 1-12, day 1-31,
        // weekday 0-6, and every table is sized to its field's maximum.
        self.hours[local.hour() as usize]
            && self.matches_day(
                local.month() as usize,
                local.day() as usize,
                local.weekday().num_days_from_sunday() as usize,
            )
    }

    fn matches_day(&self, month: usize, day_of_month: usize, day_of_week: usize) -> bool {
        if !self.months[month] {
            return false;
        }
        let dom = self.days_of_month[day_of_month];
        let dow = self.days_of_week[day_of_week];
        match (self.dom_restricted, self.dow_restricted) {
            (true, true) => dom || dow,
            _ => dom && dow,
        }
    }

    /// Do both schedules match some hour of some day? Every (month, day of month,
    /// day of week) combination happens in some year, so checking them all is exact.
    pub fn overlaps(&self, other: &Schedule) -> bool {
        let shared_hour = self.hours.iter().zip(&other.hours).any(|(a, b)| *a && *b);
        if !shared_hour {
            return false;
        }
        (1..=12).any(|month| {
            (1..=31).any(|dom| {
                (0..7).any(|dow| {
                    self.matches_day(month, dom, dow) && other.matches_day(month, dom, dow)
                })
            })
        })
    }
}

/// Validates every cron expression, then rejects any two that overlap.
pub fn validate_schedules(crons: &[String]) -> Result<(), CronError> {
    let schedules = crons
        .iter()
        .map(|cron| validate_cron(cron))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, first) in schedules.iter().enumerate() {
        for (j, second) in schedules.iter().enumerate().skip(i + 1) {
            if first.overlaps(second) {
                return Err(CronError::Overlap {
                    first: crons[i].clone(),
                    second: crons[j].clone(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn accepted_and_refused_expressions() {
        let cases: &[(&str, Option<&str>)] = &[
            ("* 8-18 * * 1-5", None),
            ("* */2 * * *", None),
            ("* 0,12 1 1 7", None),
            ("* 9 * * *", None),
            ("0 9 * * *", Some("the minute field must be `*`")),
            ("* 9 * *", Some("must have 5 fields")),
            (
                "* 24 * * *",
                Some("invalid hour field `24` (24 is outside 0-23)"),
            ),
            ("* 9 0 * *", Some("day-of-month")),
            ("* 9 * 13 *", Some("month")),
            ("* 9 * * 8", Some("day-of-week")),
            ("* 18-8 * * *", Some("backwards")),
            ("* */0 * * *", Some("at least 1")),
            ("* x * * *", Some("`x` is not a number")),
        ];
        for (cron, expected) in cases {
            match (validate_cron(cron), expected) {
                (Ok(_), None) => {}
                (Err(err), Some(text)) => {
                    assert!(err.to_string().contains(text), "{cron}: {err}")
                }
                (result, _) => panic!("{cron}: unexpected {result:?}"),
            }
        }
    }

    #[test]
    fn overlapping_schedules() {
        let cases: &[(&[&str], bool)] = &[
            (&["* 8-18 * * 1-5", "* 19-23 * * 1-5"], false),
            (&["* 8-18 * * 1-5", "* 18 * * *"], true),
            (&["* 8-18 * * 1-5", "* 8-18 * * 0,6"], false),
            (&["* 8-18 * * 1-5", "* 8-18 * * 7"], false),
            (&["* 8-18 * * 0", "* 8-18 * * 7"], true),
            (&["* 9 1 * *", "* 9 * * 1"], true),
            (&["* 9 * 1 *", "* 9 * 2 *"], false),
        ];
        for (crons, overlap) in cases {
            let crons: Vec<String> = crons.iter().map(|c| c.to_string()).collect();
            let result = validate_schedules(&crons);
            assert_eq!(
                matches!(result, Err(CronError::Overlap { .. })),
                *overlap,
                "{crons:?}: {result:?}"
            );
        }
    }

    #[test]
    fn matching_local_times() {
        // 2026-03-02 is a Monday, 2026-03-01 a Sunday, 2026-03-07 a Saturday.
        let cases: &[(&str, &str, bool)] = &[
            ("* 8-18 * * 1-5", "2026-03-02T08:00:00", true),
            ("* 8-18 * * 1-5", "2026-03-02T07:59:59", false),
            ("* 8-18 * * 1-5", "2026-03-02T18:59:59", true),
            ("* 8-18 * * 1-5", "2026-03-02T19:00:00", false),
            ("* 8-18 * * 1-5", "2026-03-07T12:00:00", false),
            ("* 8-18 * * 1-5", "2026-03-01T12:00:00", false),
            ("* 8-18 * * 0,6", "2026-03-07T12:00:00", true),
            // 7 is Sunday too.
            ("* 9 * * 7", "2026-03-01T09:30:00", true),
            ("* 9 * * 7", "2026-03-02T09:30:00", false),
            ("* */6 * * *", "2026-03-02T12:00:00", true),
            ("* */6 * * *", "2026-03-02T13:00:00", false),
            ("* 10-20/5 * * *", "2026-03-02T15:00:00", true),
            ("* 10-20/5 * * *", "2026-03-02T16:00:00", false),
            ("* 0,12 * * *", "2026-03-02T00:00:00", true),
            ("* 0,12 * * *", "2026-03-02T23:00:00", false),
            // Month and day of month alone: both must match.
            ("* 9 1 3 *", "2026-03-01T09:00:00", true),
            ("* 9 1 3 *", "2026-04-01T09:00:00", false),
            ("* 9 1 3 *", "2026-03-02T09:00:00", false),
            // Both day fields restricted: either day matches (cron's rule)...
            ("* 9 15 * 1", "2026-03-15T09:00:00", true),
            ("* 9 15 * 1", "2026-03-02T09:00:00", true),
            ("* 9 15 * 1", "2026-03-03T09:00:00", false),
            // ...but the month still applies to both.
            ("* 9 15 3 1", "2026-04-06T09:00:00", false),
            ("* 9 31 * *", "2026-02-28T09:00:00", false),
            ("* 9 29 2 *", "2028-02-29T09:00:00", true),
            ("* * * * *", "2026-12-31T23:59:59", true),
        ];
        for (cron, local, expected) in cases {
            let schedule = validate_cron(cron).unwrap();
            let local: NaiveDateTime = local.parse().unwrap();
            assert_eq!(schedule.matches(local), *expected, "{cron} at {local}");
        }
    }
}
