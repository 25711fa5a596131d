//! The one clock Abode reads. Every deadline, expiry, heartbeat judgement
//! and stored timestamp asks a [`Clock`] for the time instead of the
//! operating system, so that tests move time forward instead of waiting for
//! it: a [`ManualClock`] in process, or an offset file (see
//! [`Clock::with_offset_file`]) when the test drives the real binary.
//!
//! Times are milliseconds since the Unix epoch, the unit every stored time
//! uses.

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
