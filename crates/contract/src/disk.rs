//! A home volume's use, judged alike by the provider (the thresholds'
//! defaults), the server (when to tell the owner) and what shows it.

/// The thresholds of an agent whose template says none, in percent.
pub const DEFAULT_WARNING_PERCENTS: [i64; 2] = [90, 98];

/// How full a volume is, as `df` says it: used over what the user could
/// have (used + available), rounded up; 0 for an empty report.
pub fn used_percent(used: u64, available: u64) -> u64 {
    let whole = u128::from(used) + u128::from(available);
    if whole == 0 {
        return 0;
    }
    let percent = (u128::from(used) * 100).div_ceil(whole);
    u64::try_from(percent).unwrap_or(100)
}

/// Stored thresholds (`"90,98"`) read back, ascending, each 1 to 100; the
/// defaults when none were stored (an agent older than them).
pub fn warning_percents(stored: Option<&str>) -> Vec<i64> {
    let Some(stored) = stored else {
        return DEFAULT_WARNING_PERCENTS.to_vec();
    };
    let mut percents: Vec<i64> = stored
        .split(',')
        .filter_map(|part| part.trim().parse().ok())
        .filter(|percent| (1..=100).contains(percent))
        .collect();
    percents.sort_unstable();
    percents.dedup();
    percents
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percents_are_df_s_and_thresholds_read_back() {
        assert_eq!(used_percent(0, 0), 0);
        assert_eq!(used_percent(90, 10), 90);
        assert_eq!(used_percent(901, 99), 91, "rounded up, as df does");
        assert_eq!(used_percent(100, 0), 100);
        assert_eq!(warning_percents(None), vec![90, 98]);
        assert_eq!(warning_percents(Some("98,90,90")), vec![90, 98]);
        assert_eq!(warning_percents(Some("")), Vec::<i64>::new(), "none wanted");
        assert_eq!(warning_percents(Some("50,x,101")), vec![50]);
    }
}
