//! The set of days on which a template lets autostart run
//! (`--autostart-days mon,tue,...`).

use std::fmt;

use chrono::Weekday;

/// A set of weekdays.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Weekdays(u8);

/// A day list the CLI or API was given that names no weekday.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown day `{0}`: expected a comma-separated list of mon, tue, wed, thu, fri, sat, sun")]
pub struct UnknownWeekday(pub String);

const ORDER: [Weekday; 7] = [
    Weekday::Mon,
    Weekday::Tue,
    Weekday::Wed,
    Weekday::Thu,
    Weekday::Fri,
    Weekday::Sat,
    Weekday::Sun,
];

impl Weekdays {
    pub const NONE: Weekdays = Weekdays(0);
    pub const ALL: Weekdays = Weekdays(0x7f);

    pub fn of(days: &[Weekday]) -> Weekdays {
        days.iter().fold(Weekdays::NONE, |set, day| set.with(*day))
    }

    pub fn with(self, day: Weekday) -> Weekdays {
        Weekdays(self.0 | 1 << day.num_days_from_monday())
    }

    pub fn contains(self, day: Weekday) -> bool {
        self.0 & 1 << day.num_days_from_monday() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Reads `mon,tue,...` (case-insensitive, full names accepted); an empty
    /// text is the empty set.
    pub fn parse(text: &str) -> Result<Weekdays, UnknownWeekday> {
        text.split(',')
            .map(str::trim)
            .filter(|day| !day.is_empty())
            .try_fold(Weekdays::NONE, |set, day| {
                day.parse::<Weekday>()
                    .map(|day| set.with(day))
                    .map_err(|_| UnknownWeekday(day.to_string()))
            })
    }
}

/// `mon,tue,...` in week order, the form [`Weekdays::parse`] reads.
impl fmt::Display for Weekdays {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for day in ORDER.iter().filter(|day| self.contains(**day)) {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            f.write_str(&day.to_string().to_lowercase())?;
        }
        Ok(())
    }
}

impl fmt::Debug for Weekdays {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Weekdays({self})")
    }
}
