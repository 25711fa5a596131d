//! The autostart schedules parsed by earlier ticks. Parsing a cron is by far
//! the costliest step of a tick (tens of microseconds each, against well
//! under one for the rules), and schedules rarely change, so the tick loop
//! can keep them from one tick to the next. The cache only saves work: a
//! decision is the same with a fresh one.

use std::collections::HashMap;

use crate::cron::{Schedule, ScheduleError};
use crate::AutostartSchedule;

/// Parsed schedules by their stored text, with the tick that last used each.
#[derive(Debug, Default)]
pub struct ScheduleCache {
    parsed: HashMap<AutostartSchedule, Entry>,
    tick: u64,
}

#[derive(Debug)]
struct Entry {
    schedule: Result<Schedule, ScheduleError>,
    used_in: u64,
}

impl ScheduleCache {
    /// How many schedules it holds.
    pub fn len(&self) -> usize {
        self.parsed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parsed.is_empty()
    }

    /// Starts a tick.
    pub(crate) fn begin(&mut self) {
        self.tick = self.tick.wrapping_add(1);
    }

    /// Ends a tick: forgets the schedules it did not use, so the cache holds
    /// no more than the schedules in use.
    pub(crate) fn end(&mut self) {
        let tick = self.tick;
        self.parsed.retain(|_, entry| entry.used_in == tick);
    }

    pub(crate) fn get(
        &mut self,
        autostart: &AutostartSchedule,
    ) -> Result<&Schedule, &ScheduleError> {
        let tick = self.tick;
        let entry = self
            .parsed
            .entry(autostart.clone())
            .or_insert_with(|| Entry {
                schedule: Schedule::parse(&autostart.cron, &autostart.timezone),
                used_in: tick,
            });
        entry.used_in = tick;
        entry.schedule.as_ref()
    }
}
