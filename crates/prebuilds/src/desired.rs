//! How many prebuilt workspaces a preset wants at a given instant.
//!
//! Schedules are written in wall-clock hours of the preset's time zone, so the
//! instant is converted to that zone's local time first (chrono-tz, which
//! knows daylight-saving changes): on a spring-forward day the skipped local
//! hour matches no schedule, on a fall-back day the repeated hour matches
//! twice, once per offset.

use abode_contract::cron::validate_cron;
use abode_contract::presets::PrebuildSettings;
use chrono::{DateTime, Utc};
use chrono_tz::Tz;

/// The instances wanted at `now`, and why the schedules were ignored if they
/// were.
///
/// The first schedule whose cron matches the local hour wins (the provider
/// refuses overlapping schedules, so there is at most one); with none, the
/// preset's `instances`. A stored definition the provider would refuse (an
/// unknown time zone, an invalid cron) cannot be acted on safely, so all its
/// schedules are ignored and the problem is reported. Negative counts read
/// as 0.
pub(crate) fn desired_instances(
    settings: &PrebuildSettings,
    now: DateTime<Utc>,
) -> (usize, Option<String>) {
    let default = count(settings.instances);
    let Some(scheduling) = &settings.scheduling else {
        return (default, None);
    };
    if scheduling.schedules.is_empty() {
        return (default, None);
    }
    let zone: Tz = match scheduling.timezone.parse() {
        Ok(zone) => zone,
        Err(_) => {
            return (
                default,
                Some(format!(
                    "time zone `{}` is unknown: schedules ignored",
                    scheduling.timezone
                )),
            )
        }
    };
    let local = now.with_timezone(&zone).naive_local();
    let mut matched = None;
    for schedule in &scheduling.schedules {
        match validate_cron(&schedule.cron) {
            Ok(cron) => {
                if matched.is_none() && cron.matches(local) {
                    matched = Some(count(schedule.instances));
                }
            }
            Err(err) => return (default, Some(format!("{err}: schedules ignored"))),
        }
    }
    (matched.unwrap_or(default), None)
}

fn count(instances: i64) -> usize {
    usize::try_from(instances).unwrap_or(0)
}
