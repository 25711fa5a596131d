//! Characters a name must not hold: the ones that change how the text
//! around them is shown without being seen themselves. A template's names
//! (parameters, presets, the files of its archive) reach people's
//! terminals, the dashboard and reviews of plans; a name that holds a
//! right-to-left override or a terminal escape can pass for another
//! (`txt.exe` shown as `exe.txt`) or rewrite what is around it. Values are
//! free text and are escaped where they are shown; names are refused.

/// C0 and C1 controls (`\n`, `\x1b`, U+009B...), the bidirectional
/// embeddings, overrides, isolates and marks (U+202A..U+202E,
/// U+2066..U+2069, U+200E, U+200F, U+061C) and the line and paragraph
/// separators (U+2028, U+2029).
pub fn is_hidden_control(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{61c}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// `Err` saying which character of `name` (shown escaped) makes it no name:
/// `what` says whose name it is (`parameter`, `preset`, `archive path`).
pub fn check_name_text(what: &str, name: &str) -> Result<(), String> {
    match name.chars().find(|c| is_hidden_control(*c)) {
        None => Ok(()),
        Some(c) => Err(format!(
            "{what} `{}` holds {}, a control or bidirectional character: names may not",
            name.escape_debug(),
            c.escape_unicode()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_hidden_characters_are_refused() {
        let cases = [
            ("region", None),
            ("café-naïve", None),
            ("日本", None),
            ("invoice\u{202e}txt.exe", Some("\\u{202e}")),
            ("a\u{2066}b", Some("\\u{2066}")),
            ("line\nbreak", Some("\\u{a}")),
            ("\x1b[2J", Some("\\u{1b}")),
            ("c1\u{9b}", Some("\\u{9b}")),
            ("mark\u{200f}", Some("\\u{200f}")),
        ];
        for (name, refused) in cases {
            let result = check_name_text("parameter", name);
            match refused {
                None => assert_eq!(result, Ok(()), "{name:?}"),
                Some(shown) => {
                    let message = result.unwrap_err();
                    assert!(message.contains(shown), "{name:?}: {message}");
                    assert!(
                        !message.chars().any(is_hidden_control),
                        "{name:?}: the refusal itself holds it: {message:?}"
                    );
                }
            }
        }
    }
}
