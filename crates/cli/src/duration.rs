//! Lengths of time on the command line: a whole number with a unit, `s`,
//! `m`, `h` or `d` (`90m`, `24h`, `30d`), or a bare number of seconds
//! (`3600`). One format for every long duration flag (session and token
//! lifetimes), so nobody has to guess which unit a flag means.

use std::time::Duration;

const UNITS: [(char, u64); 4] = [('s', 1), ('m', 60), ('h', 3600), ('d', 86_400)];

/// Parses `N`, `Ns`, `Nm`, `Nh` or `Nd`; zero is refused.
pub fn parse(text: &str) -> Result<Duration, String> {
    let duration = parse_or_zero(text)?;
    if duration.is_zero() {
        return Err("the duration must be greater than zero".into());
    }
    Ok(duration)
}

/// Like [`parse`], and `0` (with or without a unit) is zero: for settings
/// where zero turns a rule off (`abode templates edit --default-ttl 0`).
pub fn parse_or_zero(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (digits, unit) = match text.chars().last() {
        Some(last) if last.is_ascii_alphabetic() => {
            let Some((_, seconds)) = UNITS.iter().find(|(unit, _)| *unit == last) else {
                return Err(format!(
                    "unknown unit in {text:?}: use s, m, h or d (e.g. 90m, 24h, 30d)"
                ));
            };
            (&text[..text.len() - 1], *seconds)
        }
        _ => (text, 1),
    };
    let value: u64 = digits.parse().map_err(|_| {
        format!("expected a duration like 90m, 24h, 30d or 3600 (seconds), got {text:?}")
    })?;
    Ok(Duration::from_secs(value.saturating_mul(unit)))
}

/// The shortest exact spelling of a duration in the same format (`30d`,
/// `90m`; `0` for zero).
pub fn format(duration: Duration) -> String {
    let seconds = duration.as_secs();
    if seconds == 0 {
        return "0".into();
    }
    for (unit, size) in UNITS.iter().rev() {
        if seconds > 0 && seconds.is_multiple_of(*size) {
            return format!("{}{unit}", seconds / size);
        }
    }
    format!("{seconds}s")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn units_and_bare_seconds() {
        assert_eq!(parse("90m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("24h").unwrap(), Duration::from_secs(86_400));
        assert_eq!(parse("30d").unwrap(), Duration::from_secs(2_592_000));
        assert_eq!(parse("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse("3600").unwrap(), Duration::from_secs(3600));
        for bad in ["", "0", "0d", "1w", "1.5h", "-1s", "h", "1 h", "1ms"] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(format(Duration::from_secs(2_592_000)), "30d");
        assert_eq!(format(Duration::from_secs(5400)), "90m");
        assert_eq!(format(Duration::from_secs(61)), "61s");
        for zero in ["0", "0m", "0d"] {
            assert_eq!(parse_or_zero(zero).unwrap(), Duration::ZERO, "{zero}");
        }
        assert_eq!(parse_or_zero("8h").unwrap(), Duration::from_secs(28_800));
        for bad in ["", "1w", "-1s", "1.5h"] {
            assert!(parse_or_zero(bad).is_err(), "{bad:?} was accepted");
        }
        assert_eq!(format(Duration::ZERO), "0");
    }
}
