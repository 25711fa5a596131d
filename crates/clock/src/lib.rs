//! The one clock Abode reads. Every deadline, expiry, heartbeat judgement
//! and stored timestamp asks a [`Clock`] for the time instead of the
//! operating system, so that tests move time forward instead of waiting for
//! it: a [`ManualClock`] in process, or an offset file (see
//! [`Clock::with_offset_file`]) when the test drives the real binary.
//!
//! Times are milliseconds since the Unix epoch, the unit every stored time
//! uses.
//!
//! A manual clock (`Clock::manual`, moved by its `ManualClock`) serves
//! in-process tests; the system's plus an offset read from a file
//! (`Clock::with_offset_file`, the hidden `abode server --clock-offset-file`)
//! serves tests of the real binary. The server gives one clock to the control
//! plane (deadlines, expiry, heartbeat judgements) and to the store
//! (`Store::with_clock`: every stored time, audit included). Periodic sweeps
//! still run on tokio timers; only what they compare against is the clock's.
//! `UtcTime` (with `days_from_civil`) is the one calendar the API, the CLI and
//! notifications print and read UTC times with.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A handle to the time source; cheap to clone, shared by every part of a
/// server.
#[derive(Clone)]
pub struct Clock {
    source: Source,
}

#[derive(Clone)]
enum Source {
    System,
    Manual(Arc<AtomicI64>),
    /// The system's time plus the milliseconds written in a file.
    OffsetFile(Arc<PathBuf>),
}

impl Clock {
    /// The operating system's clock.
    pub fn system() -> Clock {
        Clock {
            source: Source::System,
        }
    }

    /// A clock that stands still at `start_ms` until its [`ManualClock`]
    /// moves it.
    pub fn manual(start_ms: i64) -> (Clock, ManualClock) {
        let now = Arc::new(AtomicI64::new(start_ms));
        (
            Clock {
                source: Source::Manual(now.clone()),
            },
            ManualClock { now },
        )
    }

    /// The system's clock moved forward by the number of milliseconds the
    /// file holds (read at every call; no file or no number: no offset).
    /// For tests of the real binary, which move its time by writing the
    /// file; never for production.
    pub fn with_offset_file(path: PathBuf) -> Clock {
        Clock {
            source: Source::OffsetFile(Arc::new(path)),
        }
    }

    /// Milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        match &self.source {
            Source::System => system_ms(),
            Source::Manual(now) => now.load(Ordering::SeqCst),
            Source::OffsetFile(path) => {
                let offset = std::fs::read_to_string(path.as_ref())
                    .ok()
                    .and_then(|text| text.trim().parse::<i64>().ok())
                    .unwrap_or(0);
                system_ms().saturating_add(offset)
            }
        }
    }

    /// Whether this clock is anything but the system's (said at start-up,
    /// so that a test clock never goes unnoticed).
    pub fn is_system(&self) -> bool {
        matches!(self.source, Source::System)
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Source::System => f.write_str("Clock::system"),
            Source::Manual(now) => write!(f, "Clock::manual({})", now.load(Ordering::SeqCst)),
            Source::OffsetFile(path) => write!(f, "Clock::with_offset_file({})", path.display()),
        }
    }
}

/// The hand that moves a manual clock.
#[derive(Clone, Debug)]
pub struct ManualClock {
    now: Arc<AtomicI64>,
}

impl ManualClock {
    pub fn advance(&self, by: Duration) {
        self.now.fetch_add(millis(by), Ordering::SeqCst);
    }

    pub fn set(&self, now_ms: i64) {
        self.now.store(now_ms, Ordering::SeqCst);
    }
}

/// A duration in milliseconds, saturating (a configured "forever" must not
/// wrap into the past).
pub fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 2)
}

/// A Unix-ms time's UTC calendar fields (proleptic Gregorian), for the
/// places that print or read times as text: one calendar for the API, the
/// CLI and notifications.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    pub year: i64,
    pub month: i64,
    pub day: i64,
    pub hour: i64,
    pub minute: i64,
    pub second: i64,
    pub millis: i64,
}

impl UtcTime {
    pub fn from_ms(ms: i64) -> UtcTime {
        let seconds = ms.div_euclid(1000);
        let of_day = seconds.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
        UtcTime {
            year,
            month,
            day,
            hour: of_day / 3600,
            minute: of_day % 3600 / 60,
            second: of_day % 60,
            millis: ms.rem_euclid(1000),
        }
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the inverse of
/// `civil_from_days`).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let shifted_month = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date `days` after 1970-01-01, counting in 400-year eras (146,097
/// days) that start on March 1st.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn system_ms() -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let (clock, hand) = Clock::manual(1_000);
        assert_eq!(clock.now_ms(), 1_000);
        hand.advance(Duration::from_secs(2));
        assert_eq!(clock.clone().now_ms(), 3_000);
        hand.set(5);
        assert_eq!(clock.now_ms(), 5);
    }

    #[test]
    fn an_offset_file_moves_the_system_time() {
        let dir = std::env::temp_dir().join(format!("abode-clock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("offset");
        let clock = Clock::with_offset_file(file.clone());
        let before = system_ms();
        assert!(clock.now_ms() >= before && clock.now_ms() < before + 60_000);
        std::fs::write(&file, "3600000\n").unwrap();
        assert!(clock.now_ms() >= before + 3_600_000);
        std::fs::write(&file, "not a number").unwrap();
        assert!(clock.now_ms() < before + 60_000);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn forever_does_not_wrap() {
        assert!(millis(Duration::MAX) > 0);
    }
}
