//! A stored time (Unix ms, from the injected clock) as people read it and
//! as the pure decisions (`abode-schedule`, `abode-prebuilds`) take it: the
//! two conversions every domain module shares, kept out of any one of them.

use chrono::{DateTime, Utc};

/// Unix ms as `YYYY-MM-DDTHH:MM:SSZ` (UTC), for people.
pub fn utc_text(ms: i64) -> String {
    let t = abode_clock::UtcTime::from_ms(ms);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

/// Unix ms as a UTC time (out of range: the epoch, never a panic).
pub fn utc_datetime(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}
