//! Printing for people (aligned tables, `key: value` blocks) and for scripts (JSON).

use std::io::Write;

use serde::Serialize;

/// Prints `value` as pretty JSON on stdout.
pub fn print_json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value)?;
    writeln!(stdout)?;
    Ok(())
}

/// Renders rows under upper-case headers, columns separated by two spaces;
/// the last column is not padded so lines carry no trailing blanks.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
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
