//! Turning attribute values from the plan into short, safe text.
//!
//! The plan JSON carries sensitive values in clear text and marks them only in
//! the parallel `before_sensitive`/`after_sensitive` trees. Every value the guard
//! shows goes through [`render`], which walks the value and its masks together,
//! so a secret can only leave this module as `(sensitive value)`.

use serde::Deserialize;
use serde_json::Value;
use std::fmt::Write;

pub(crate) const SENSITIVE: &str = "(sensitive value)";
pub(crate) const UNKNOWN: &str = "(known after apply)";
/// Long values are cut so that one attribute cannot flood a build log.
const MAX_RENDERED: usize = 160;

/// One step of an attribute path in `replace_paths`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum PathStep {
    Key(String),
    Index(u64),
}

/// Prints a path the way Terraform users write it: `name`, `tags["team"]`, `disk[0].size`.
pub fn path_to_string(path: &[PathStep]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            PathStep::Key(k) if out.is_empty() => out.push_str(k),
            PathStep::Key(k) if is_identifier(k) => {
                out.push('.');
                out.push_str(k);
            }
            PathStep::Key(k) => {
                let _ = write!(out, "[{}]", Value::String(k.clone()));
            }
            PathStep::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
    out
}

/// Like [`path_to_string`], but a map key below a sensitive value may itself be
/// the secret (a sensitive map's keys are as secret as its values): from the
/// first sensitive step on, keys print as `(sensitive value)`.
pub(crate) fn path_to_string_masked(path: &[PathStep], sensitive: &Value) -> String {
    let shown = (0..path.len())
        .find(|&i| i > 0 && mask_at(sensitive, &path[..i]) == &Value::Bool(true))
        .unwrap_or(path.len());
    let mut out = path_to_string(&path[..shown]);
    for step in &path[shown..] {
        match step {
            PathStep::Key(_) => {
                let _ = write!(out, "[{SENSITIVE}]");
            }
            PathStep::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
    out
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}

fn child<'a>(value: &'a Value, step: &PathStep) -> Option<&'a Value> {
    match (value, step) {
        (Value::Object(map), PathStep::Key(k)) => map.get(k),
        (Value::Array(items), PathStep::Index(i)) => {
            usize::try_from(*i).ok().and_then(|i| items.get(i))
        }
        _ => None,
    }
}

/// Follows `path` into a value; `None` when it does not exist there.
pub(crate) fn value_at<'a>(value: &'a Value, path: &[PathStep]) -> Option<&'a Value> {
    path.iter().try_fold(value, child)
}

/// Follows `path` into a mask tree (`*_sensitive` or `after_unknown`). A `true`
/// anywhere on the way covers everything below it.
pub(crate) fn mask_at<'a>(mask: &'a Value, path: &[PathStep]) -> &'a Value {
    let mut current = mask;
    for step in path {
        if current == &Value::Bool(true) {
            return current;
        }
        match child(current, step) {
            Some(next) => current = next,
            None => return &Value::Bool(false),
        }
    }
    current
}

fn mask_child<'a>(mask: &'a Value, step: &PathStep) -> &'a Value {
    mask_at(mask, std::slice::from_ref(step))
}

/// The union of two sensitivity masks. A change shows one attribute twice
/// (before and after) but Terraform marks each side on its own: a value that
/// became sensitive in this template version is unmarked in the last build's
/// state, yet it is the same secret. Hiding what either side marks, on both
/// sides, is the only safe reading.
pub(crate) fn union_masks(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Bool(true), _) | (_, Value::Bool(true)) => Value::Bool(true),
        (Value::Object(x), Value::Object(y)) => {
            let mut out = x.clone();
            for (key, mask) in y {
                let merged = match x.get(key) {
                    Some(other) => union_masks(other, mask),
                    None => mask.clone(),
                };
                out.insert(key.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(x), Value::Array(y)) => Value::Array(
            (0..x.len().max(y.len()))
                .map(|i| match (x.get(i), y.get(i)) {
                    (Some(p), Some(q)) => union_masks(p, q),
                    (Some(one), None) | (None, Some(one)) => one.clone(),
                    (None, None) => Value::Bool(false),
                })
                .collect(),
        ),
        (Value::Bool(false) | Value::Null, other) | (other, Value::Bool(false) | Value::Null) => {
            other.clone()
        }
        // The two sides disagree on the value's shape: hide all of it.
        _ => Value::Bool(true),
    }
}

/// Secrets shorter than this are hidden only where they are the whole value:
/// hiding every string that contains a one-letter secret would hide everything.
const MIN_EMBEDDED_SECRET: usize = 4;

/// Collects, as text, every string and number of `value` under a `true` mark.
///
/// Terraform marks only where a secret was put, not where a provider copies
/// it: `terraform_data`'s computed `output` repeats a sensitive `input` with no
/// mark at all. Rendering hides any unmarked string that contains one of these.
pub(crate) fn collect_secrets(value: &Value, sensitive: &Value, out: &mut Vec<String>) {
    match (value, sensitive) {
        (Value::String(s), Value::Bool(true)) => out.push(s.clone()),
        (Value::Number(n), Value::Bool(true)) => out.push(n.to_string()),
        (Value::Array(items), _) => {
            for (i, item) in items.iter().enumerate() {
                collect_secrets(item, mask_child(sensitive, &PathStep::Index(i as u64)), out);
            }
        }
        (Value::Object(map), _) => {
            for (key, item) in map {
                collect_secrets(
                    item,
                    mask_child(sensitive, &PathStep::Key(key.clone())),
                    out,
                );
            }
        }
        _ => {}
    }
}

pub(crate) fn reveals(text: &str, secrets: &[String]) -> bool {
    secrets.iter().any(|secret| {
        text == secret
            || (secret.chars().count() >= MIN_EMBEDDED_SECRET && text.contains(secret.as_str()))
    })
}

/// Renders `value` with `sensitive` and `unknown` masks laid over it; any
/// scalar that reveals one of `secrets` (see [`collect_secrets`]) is hidden too.
pub(crate) fn render(
    value: Option<&Value>,
    sensitive: &Value,
    unknown: &Value,
    secrets: &[String],
) -> String {
    let mut out = String::new();
    render_into(&mut out, value, sensitive, unknown, secrets);
    if out.chars().count() > MAX_RENDERED {
        let cut: String = out.chars().take(MAX_RENDERED).collect();
        return format!("{cut}…");
    }
    out
}

fn render_into(
    out: &mut String,
    value: Option<&Value>,
    sensitive: &Value,
    unknown: &Value,
    secrets: &[String],
) {
    if sensitive == &Value::Bool(true) {
        out.push_str(SENSITIVE);
        return;
    }
    if unknown == &Value::Bool(true) {
        out.push_str(UNKNOWN);
        return;
    }
    if out.len() > MAX_RENDERED * 4 {
        // Enough has been written to be cut anyway; stop walking huge values.
        return;
    }
    match value {
        None | Some(Value::Null) => out.push_str("null"),
        Some(Value::Array(items)) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let step = PathStep::Index(i as u64);
                render_into(
                    out,
                    Some(item),
                    mask_child(sensitive, &step),
                    mask_child(unknown, &step),
                    secrets,
                );
            }
            out.push(']');
        }
        Some(Value::Object(map)) => {
            if map.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push_str("{ ");
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                if is_identifier(key) {
                    out.push_str(key);
                } else {
                    out.push_str(&Value::String(key.clone()).to_string());
                }
                out.push_str(" = ");
                let step = PathStep::Key(key.clone());
                render_into(
                    out,
                    Some(item),
                    mask_child(sensitive, &step),
                    mask_child(unknown, &step),
                    secrets,
                );
            }
            out.push_str(" }");
        }
        Some(Value::String(s)) if reveals(s, secrets) => out.push_str(SENSITIVE),
        Some(Value::Number(n)) if reveals(&n.to_string(), secrets) => out.push_str(SENSITIVE),
        Some(scalar) => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_cover_nested_values() {
        let value = json!({"a": "open", "b": {"c": "hidden", "d": [1, 2]}});
        let sensitive = json!({"b": {"c": true}});
        let unknown = json!({"b": {"d": [false, true]}});
        assert_eq!(
            render(Some(&value), &sensitive, &unknown, &[]),
            r#"{ a = "open", b = { c = (sensitive value), d = [1, (known after apply)] } }"#
        );
        assert_eq!(
            render(Some(&value), &json!(true), &json!(false), &[]),
            SENSITIVE
        );
    }

    #[test]
    fn unmarked_copies_of_a_secret_are_hidden() {
        let value = json!({"input": "hunter2", "output": "hunter2", "dsn": "pg://a:hunter2@db", "n": 4711, "x": "a"});
        let sensitive = json!({"input": true, "n": true});
        let mut secrets = Vec::new();
        collect_secrets(
            &json!({"input": "hunter2", "n": 4711, "short": "a"}),
            &json!({"input": true, "n": true, "short": true}),
            &mut secrets,
        );
        assert_eq!(
            render(Some(&value), &sensitive, &json!(false), &secrets),
            r#"{ dsn = (sensitive value), input = (sensitive value), n = (sensitive value), output = (sensitive value), x = (sensitive value) }"#
        );
        let open = json!({"x": "ab", "y": "b"});
        assert_eq!(
            render(Some(&open), &json!(false), &json!(false), &secrets),
            r#"{ x = "ab", y = "b" }"#,
            "a short secret hides only itself"
        );
    }

    #[test]
    fn a_mark_on_either_side_hides_both() {
        let before = json!({"a": {"b": true}, "l": [false, true]});
        let after = json!({"c": true, "l": [true], "m": {}});
        assert_eq!(
            union_masks(&before, &after),
            json!({"a": {"b": true}, "c": true, "l": [true, true], "m": {}})
        );
        assert_eq!(
            union_masks(&json!([false]), &json!({"x": false})),
            json!(true)
        );
        assert_eq!(
            union_masks(&json!(false), &json!({"x": true})),
            json!({"x": true})
        );
    }

    #[test]
    fn paths_read_like_terraform() {
        let path = vec![
            PathStep::Key("tags".into()),
            PathStep::Key("team name".into()),
            PathStep::Index(0),
            PathStep::Key("x".into()),
        ];
        assert_eq!(path_to_string(&path), r#"tags["team name"][0].x"#);
        assert_eq!(
            mask_at(&json!({"tags": true}), &path),
            &Value::Bool(true),
            "a sensitive parent covers its children"
        );
    }
}
