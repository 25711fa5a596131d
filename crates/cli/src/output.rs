//! Printing for people (aligned tables, `key: value` blocks) and for scripts (JSON).
//!
//! Most of what the CLI prints was written by someone else: template version
//! messages, parameter values, usernames, build errors, Terraform's output,
//! audit details. A terminal obeys control characters wherever they come from,
//! so a raw ESC in such a string could clear the reader's screen, move the
//! cursor, retitle the window or (with CR) print a fake line over a real one.
//! Every string a server supplies therefore goes through [`visible`] before it
//! reaches a terminal; tables apply it to every cell themselves so no list can
//! forget. JSON output needs none of this: serde_json escapes every control
//! character, and scripts get the exact values.

use std::fmt::Write as _;
use std::io::Write;

use serde::Serialize;

/// Prints `value` as pretty JSON on stdout.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value)?;
    writeln!(stdout)?;
    Ok(())
}

/// `text` with every character a terminal would act on rather than show made
/// visible, so that it prints as exactly one line of inert text:
///
/// - ESC as `\e`; newline, carriage return and tab as `\n`, `\r`, `\t` (a
///   newline would end a table row or forge a line; a tab breaks alignment);
/// - every other C0 control (U+0000 to U+001F) and DEL as `\xNN`;
/// - C1 controls (U+0080 to U+009F; some terminals read U+009B as CSI) as
///   `\u{NN}`;
/// - the Unicode bidirectional controls (U+061C, U+200E, U+200F, U+202A to
///   U+202E, U+2066 to U+2069) as `\u{NNNN}`: they reorder what follows on the
///   line, so `abc\u{202e}fdp.exe` would read as `abcexe.pdf` (the "Trojan
///   Source" trick); careful tools show them, and so does Abode;
/// - the line and paragraph separators U+2028 and U+2029, which some
///   terminals and viewers treat as line breaks, as `\u{2028}`, `\u{2029}`.
///
/// Everything else, including a backslash and other non-ASCII text, is kept
/// as it is: the result is for reading, not for parsing back (`--output json`
/// has the exact values). Since the escapes are printable ASCII, applying
/// `visible` twice changes nothing.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\x1b' => out.push_str("\\e"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0'..='\x1f' | '\x7f' => {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            '\u{80}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{2028}'
            | '\u{2029}' => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            _ => out.push(c),
        }
    }
    out
}

/// Renders rows under upper-case headers, columns separated by two spaces;
/// the last column is not padded so lines carry no trailing blanks. Every
/// cell goes through [`visible`], so a row is always one line.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| visible(cell)).collect())
        .collect();
    let rows = rows.as_slice();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header_row: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header_row).chain(rows) {
        let mut line = String::new();
        for (index, cell) in row.iter().enumerate() {
            if index + 1 == row.len() {
                line.push_str(cell);
            } else {
                let pad = widths[index] - cell.chars().count();
                line.push_str(cell);
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Prints a table on stdout, or `empty` when there is nothing to list.
pub fn print_table(headers: &[&str], rows: &[Vec<String>], empty: &str) {
    if rows.is_empty() {
        println!("{empty}");
    } else {
        print!("{}", table(headers, rows));
    }
}

/// An RFC 3339 time as `YYYY-MM-DD HH:MM:SS` (UTC), or `-` when absent.
pub fn time(value: Option<&str>) -> String {
    match value {
        Some(text) => match (text.get(..10), text.get(11..19)) {
            (Some(date), Some(clock)) => format!("{date} {clock}"),
            _ if text.is_empty() => "-".to_string(),
            _ => text.to_string(),
        },
        None => "-".to_string(),
    }
}

/// An optional text, `-` when absent or empty.
pub fn or_dash(value: Option<&str>) -> String {
    match value {
        Some(text) if !text.is_empty() => text.to_string(),
        _ => "-".to_string(),
    }
}

/// The error and its causes on one line, without repeating a cause whose
/// text the outer message already contains; controls made visible, since a
/// server's message may quote other people's text.
pub fn one_line(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    visible(&line.replace('\n', " "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns() {
        let rows = vec![
            vec!["dev".to_string(), "running".to_string(), "x".to_string()],
            vec![
                "a-long-name".to_string(),
                "stopped".to_string(),
                String::new(),
            ],
        ];
        let expected = "\
NAME         STATUS   NOTE
dev          running  x
a-long-name  stopped
";
        assert_eq!(table(&["NAME", "STATUS", "NOTE"], &rows), expected);
    }

    /// Whether `text` holds anything a terminal would act on.
    fn has_controls(text: &str) -> bool {
        text.chars().any(|c| {
            c.is_control()
                || matches!(
                    c,
                    '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}'
                )
                || ('\u{202a}'..='\u{202e}').contains(&c)
                || ('\u{2066}'..='\u{2069}').contains(&c)
        })
    }

    #[test]
    fn controls_are_made_visible() {
        let cases = [
            ("\x1b[2J\x1b[1;1Hfake", "\\e[2J\\e[1;1Hfake"),
            // OSC 0 (window title) ended by BEL, and a hyperlink (OSC 8) ended by ST (ESC \).
            ("\x1b]0;owned\x07x", "\\e]0;owned\\x07x"),
            (
                "\x1b]8;;http://evil\x1b\\link",
                "\\e]8;;http://evil\\e\\link",
            ),
            ("ok\rfake", "ok\\rfake"),
            ("two\nlines\r\n", "two\\nlines\\r\\n"),
            ("a\tb", "a\\tb"),
            ("\0\x01\x08\x7f", "\\x00\\x01\\x08\\x7f"),
            ("\u{9b}31m", "\\u{9b}31m"),
            ("abc\u{202e}fdp.exe", "abc\\u{202e}fdp.exe"),
            (
                "\u{2066}x\u{2069}\u{200f}\u{61c}",
                "\\u{2066}x\\u{2069}\\u{200f}\\u{61c}",
            ),
            ("line\u{2028}sep", "line\\u{2028}sep"),
            // Ordinary text, non-ASCII included, is left alone.
            ("héllo wörld 日本 ✓ C:\\dir", "héllo wörld 日本 ✓ C:\\dir"),
            ("", ""),
        ];
        for (input, expected) in cases {
            assert_eq!(visible(input), expected, "{input:?}");
        }
    }

    #[test]
    fn every_control_character_is_made_visible() {
        let mut hostile: String = (0u32..0x20).filter_map(char::from_u32).collect();
        hostile.push('\x7f');
        hostile.extend((0x80u32..=0x9f).filter_map(char::from_u32));
        hostile.extend(['\u{61c}', '\u{200e}', '\u{200f}', '\u{2028}', '\u{2029}']);
        hostile.extend((0x202au32..=0x202e).filter_map(char::from_u32));
        hostile.extend((0x2066u32..=0x2069).filter_map(char::from_u32));
        let shown = visible(&hostile);
        assert!(!has_controls(&shown), "{shown:?}");
        assert!(shown.is_ascii(), "{shown:?}");
        // Each character is its own escape, none is dropped.
        assert_eq!(
            shown.matches('\\').count(),
            hostile.chars().count(),
            "{shown}"
        );
        // Printing the printed text again shows the same.
        assert_eq!(visible(&shown), shown);
    }

    #[test]
    fn table_cells_stay_on_their_row() {
        let rows = vec![vec!["1".to_string(), "\x1b[2J\nfake row\rx".to_string()]];
        let text = table(&["A", "B"], &rows);
        assert_eq!(text, "A  B\n1  \\e[2J\\nfake row\\rx\n");
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    #[test]
    fn times_read_well() {
        let cases = [
            (Some("2026-11-29T17:40:00.123Z"), "2026-11-29 17:40:00"),
            (Some("2026-11-29T17:40:00Z"), "2026-11-29 17:40:00"),
            (Some("soon"), "soon"),
            (Some(""), "-"),
            (None, "-"),
        ];
        for (input, expected) in cases {
            assert_eq!(time(input), expected, "{input:?}");
        }
    }
}
