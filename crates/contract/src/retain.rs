//! What an `abode_protect`'s delete rule may say, judged alike by the
//! provider (which refuses a bad value at plan, so a push fails) and the
//! platform (which keeps the record for that long).

/// The values of `on_delete`.
pub const ON_DELETE: [&str; 2] = ["destroy", "retain"];

/// The values of `expire`.
pub const EXPIRE: [&str; 2] = ["hold", "destroy"];

/// The longest a record may be kept for by a template's rule.
pub const MAX_RETAIN_SECS: u64 = 10 * 366 * 86_400;

/// A duration as templates write it: a whole number followed by `d`, `h` or
/// `m` (`30d`, `12h`, `90m`), in seconds; `None` for anything else, for
/// zero, and past ten years.
pub fn parse_retain_for(text: &str) -> Option<u64> {
    let text = text.trim();
    let unit = match text.chars().last()? {
        'd' => 86_400,
        'h' => 3_600,
        'm' => 60,
        _ => return None,
    };
    let number = &text[..text.len() - 1];
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seconds = number.parse::<u64>().ok()?.checked_mul(unit)?;
    (seconds > 0 && seconds <= MAX_RETAIN_SECS).then_some(seconds)
}
