//! What a template's deprecation may say, and how it is said: the server
//! refuses a new workspace with [`refusal`], `abode show` and the
//! dashboard's workspace page say [`notice`]. One line each, since a
//! deprecation's message is one line.

/// The longest deprecation message.
pub const MAX_MESSAGE_CHARS: usize = 500;

/// Whether `message` (and `replacement`) may deprecate template `name`:
/// one line of 1 to [`MAX_MESSAGE_CHARS`] characters, and a replacement
/// other than the template itself.
pub fn check(name: &str, message: &str, replacement: Option<&str>) -> Result<(), String> {
    if message.trim().is_empty() {
        return Err("give a deprecation message (--message): why, and what to do instead".into());
    }
    if message.chars().count() > MAX_MESSAGE_CHARS {
        return Err(format!(
            "a deprecation message is at most {MAX_MESSAGE_CHARS} characters"
        ));
    }
    if message
        .chars()
        .any(|c| c.is_control() || crate::text::is_hidden_control(c))
    {
        return Err("a deprecation message is one line, without control characters".into());
    }
    if replacement == Some(name) {
        return Err(format!(
            "template \"{name}\" cannot replace itself: name another one (--replacement)"
        ));
    }
    Ok(())
}

/// The deprecation as one line: its message and what to use instead.
pub fn notice(message: &str, replacement: Option<&str>) -> String {
    match replacement {
        Some(replacement) => format!("{message} (use template \"{replacement}\" instead)"),
        None => message.to_string(),
    }
}

/// Why no new workspace is made from the deprecated template `name`.
pub fn refusal(name: &str, message: &str, replacement: Option<&str>) -> String {
    format!(
        "template \"{name}\" is deprecated and takes no new workspaces: {}",
        notice(message, replacement)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deprecation_is_one_line_naming_its_replacement() {
        assert_eq!(check("old", "moved", Some("new")), Ok(()));
        for (message, replacement, needle) in [
            ("  ", None, "give a deprecation message"),
            ("a\nb", None, "one line"),
            ("moved", Some("old"), "cannot replace itself"),
        ] {
            let error = check("old", message, replacement).unwrap_err();
            assert!(error.contains(needle), "{error}");
        }
        assert!(check("old", &"x".repeat(501), None).is_err());
        assert_eq!(
            refusal("old", "moved to k8s", Some("new")),
            "template \"old\" is deprecated and takes no new workspaces: moved to k8s (use template \"new\" instead)"
        );
    }
}
