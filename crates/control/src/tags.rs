//! Provisioner tags (`key=value`): what a template version's builds need
//! (`abode templates push --provisioner-tag`) and what a server's
//! provisioners offer (`abode server --provisioner-tag`). A provisioner takes
//! a job only when every tag of the job's version is one of its own, so a
//! template that needs `cloud=aws-prod` builds only where those credentials
//! are (docs/deployment.md).

use std::collections::BTreeMap;

/// The most tags one version or provisioner carries.
pub const MAX_TAGS: usize = 16;
/// The longest key or value.
const MAX_PART_CHARS: usize = 64;

/// Whether `part` is 1 to 64 of `a-z A-Z 0-9 - _ .`: a tag's key or value,
/// and the names a provisioner daemon gives itself and its slots.
pub fn is_label(part: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    !part.is_empty() && part.chars().count() <= MAX_PART_CHARS && part.chars().all(allowed)
}

/// `key=value` tags, checked and sorted, duplicates dropped; a one-line
/// error naming the first bad one.
pub fn parse_tags<S: AsRef<str>>(given: &[S]) -> Result<Vec<String>, String> {
    let mut tags = BTreeMap::new();
    for text in given {
        let text = text.as_ref();
        let shown: String = text.chars().take(80).collect();
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| format!("provisioner tag `{shown}` is not key=value"))?;
        for (part, what) in [(key, "key"), (value, "value")] {
            if !is_label(part) {
                return Err(format!(
                    "provisioner tag `{shown}`: its {what} must be 1 to {MAX_PART_CHARS} of a-z, A-Z, 0-9, '-', '_', '.'"
                ));
            }
        }
        if let Some(other) = tags.insert(key.to_string(), value.to_string()) {
            if other != value {
                return Err(format!(
                    "provisioner tag `{key}` is given twice, as `{other}` and `{value}`"
                ));
            }
        }
    }
    if tags.len() > MAX_TAGS {
        return Err(format!("at most {MAX_TAGS} provisioner tags"));
    }
    Ok(tags
        .into_iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect())
}

/// A stored JSON object of tags read back; anything else is an error
/// naming it, never an empty set.
pub fn tags_of_json(json: &str) -> Result<BTreeMap<String, String>, String> {
    serde_json::from_str(json)
        .map_err(|error| format!("stored provisioner tags are not an object of strings: {error}"))
}

/// Tags as a JSON object (`{"cloud":"aws"}`), for listings.
pub fn tags_json(tags: &[String]) -> String {
    let object: BTreeMap<&str, &str> = tags.iter().filter_map(|tag| tag.split_once('=')).collect();
    serde_json::to_string(&object).unwrap_or_else(|_| "{}".into())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tags_are_checked_sorted_and_deduplicated() {
        let accepted: [(&[&str], &[&str]); 3] = [
            (&[], &[]),
            (
                &["zone=b", "cloud=aws-prod", "zone=b"],
                &["cloud=aws-prod", "zone=b"],
            ),
            (&["a.b_c-d=1.2_3-x"], &["a.b_c-d=1.2_3-x"]),
        ];
        for (given, expected) in accepted {
            assert_eq!(parse_tags(given).unwrap(), expected, "{given:?}");
        }
        let refused: [(&[&str], &str); 6] = [
            (&["cloud"], "is not key=value"),
            (&["=aws"], "its key must be"),
            (&["cloud="], "its value must be"),
            (&["cloud=a b"], "its value must be"),
            (&["clöud=aws"], "its key must be"),
            (&["cloud=a", "cloud=b"], "given twice"),
        ];
        for (given, needle) in refused {
            let error = parse_tags(given).unwrap_err();
            assert!(error.contains(needle), "{given:?}: {error}");
        }
        let many: Vec<String> = (0..17).map(|n| format!("k{n}=v")).collect();
        assert!(parse_tags(&many).unwrap_err().contains("at most 16"));
        assert_eq!(
            tags_json(&["cloud=aws".into(), "zone=b".into()]),
            r#"{"cloud":"aws","zone":"b"}"#
        );
    }
}
