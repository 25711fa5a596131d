//! Sizes on the command line: a whole number of bytes, or with a binary
//! unit, `KiB`, `MiB`, `GiB` or `TiB` (`256MiB`, `2GiB`). `0` turns a
//! minimum off.

const UNITS: [(&str, u64); 4] = [
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
];

/// Parses `N` (bytes) or `N` followed by a unit.
pub fn parse(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (digits, unit) = match UNITS.iter().find(|(unit, _)| text.ends_with(unit)) {
        Some((unit, bytes)) => (text[..text.len() - unit.len()].trim(), *bytes),
        None => (text, 1),
    };
    let value: u64 = digits.parse().map_err(|_| {
        format!("expected a size like 256MiB, 2GiB or a number of bytes, got {text:?}")
    })?;
    value
        .checked_mul(unit)
        .ok_or_else(|| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn sizes_read_as_bytes_and_bad_ones_say_why() {
        let cases: [(&str, Result<u64, &str>); 9] = [
            ("0", Ok(0)),
            ("4096", Ok(4096)),
            ("256MiB", Ok(256 << 20)),
            ("2 GiB", Ok(2 << 30)),
            ("1TiB", Ok(1 << 40)),
            ("1KiB", Ok(1024)),
            ("256MB", Err("expected a size like 256MiB")),
            ("-1", Err("expected a size")),
            ("99999999999TiB", Err("too large")),
        ];
        for (text, expected) in cases {
            match (parse(text), expected) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{text}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{text}: {got}"),
                (got, want) => panic!("{text}: {got:?}, expected {want:?}"),
            }
        }
    }
}
