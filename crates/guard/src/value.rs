//! Turning attribute values from the plan into short, safe text.
//!
//! The plan JSON carries sensitive values in clear text and marks them only in
//! the parallel `before_sensitive`/`after_sensitive` trees, and not even there
//! when a provider or `nonsensitive()` copies a secret into another attribute.
//! Every value and path the guard shows goes through [`render`] or
//! [`render_path`], which walk the value and its masks together and compare
//! each raw string, number and map key with the secrets known for it, so a
//! secret can only leave this module as `(sensitive value)`: never escaped,
//! never cut to a prefix.

use aho_corasick::AhoCorasick;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;

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

/// Collects, as text, every string and number of `value` under a `true` mark,
/// and the keys of every map under one (a sensitive map's keys are as secret
/// as its values).
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
                if sensitive == &Value::Bool(true) {
                    out.push(key.clone());
                }
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

/// Above this many secrets long enough to be searched for inside a text, one
/// Aho-Corasick pass over the text replaces one substring search per secret.
const AUTOMATON_FROM: usize = 8;

/// Secrets grouped by owner (a root variable, in the plan's order; or all the
/// values marked in one change, as owner 0), compiled once so that each string,
/// number and key is compared with all of them in one pass over its raw text.
///
/// A text reveals an owner when it is one of the owner's secrets, or holds one
/// at least [`MIN_EMBEDDED_SECRET`] characters long (shorter ones would hide
/// everything). Always asked of the raw text, before any escaping: `a"b` is no
/// longer a substring once printed as `"a\"b"`.
///
/// A plan's root variables may hold thousands of values (a map of every
/// workspace's settings), and every piece of every value shown is compared
/// with all of them: one search per secret made that the bulk of the reading.
#[derive(Debug, Default)]
pub(crate) struct SecretSet {
    /// Every secret, whole, with the owners that hold it.
    whole: HashMap<String, Vec<usize>>,
    /// The secrets long enough to be looked for inside a text, each once, with
    /// the owners that hold it.
    embedded: Vec<(String, Vec<usize>)>,
    /// Finds every `embedded` secret in one pass (its pattern ids index
    /// `embedded`); `None` for a few secrets, searched one by one.
    automaton: Option<AhoCorasick>,
}

impl SecretSet {
    /// The secrets of each owner: `owners[i]` are the texts of owner `i`.
    pub(crate) fn new(owners: &[Vec<String>]) -> SecretSet {
        let mut whole: HashMap<String, Vec<usize>> = HashMap::new();
        for (owner, secrets) in owners.iter().enumerate() {
            for secret in secrets {
                let holders = whole.entry(secret.clone()).or_default();
                if holders.last() != Some(&owner) {
                    holders.push(owner);
                }
            }
        }
        let mut embedded: Vec<(String, Vec<usize>)> = whole
            .iter()
            .filter(|(secret, _)| secret.chars().count() >= MIN_EMBEDDED_SECRET)
            .map(|(secret, holders)| (secret.clone(), holders.clone()))
            .collect();
        // Deterministic order, whatever the hash map's.
        embedded.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let automaton = if embedded.len() > AUTOMATON_FROM {
            // Standard match semantics: every occurrence of every secret is
            // reported by an overlapping search. Should building fail (too
            // many states), the secrets are searched one by one.
            AhoCorasick::new(embedded.iter().map(|(secret, _)| secret)).ok()
        } else {
            None
        };
        SecretSet {
            whole,
            embedded,
            automaton,
        }
    }

    /// The marked secrets of one change, all owned by owner 0.
    pub(crate) fn marked(secrets: Vec<String>) -> SecretSet {
        SecretSet::new(&[secrets])
    }

    /// Whether `text` reveals any secret of any owner.
    pub(crate) fn reveals(&self, text: &str) -> bool {
        if self.whole.contains_key(text) {
            return true;
        }
        match &self.automaton {
            Some(automaton) => automaton.is_match(text),
            None => self
                .embedded
                .iter()
                .any(|(secret, _)| text.contains(secret.as_str())),
        }
    }

    /// The owners whose secrets `text` reveals, in increasing order.
    pub(crate) fn owners(&self, text: &str) -> Vec<usize> {
        let mut owners: Vec<usize> = self.whole.get(text).cloned().unwrap_or_default();
        let mut add = |index: usize| owners.extend_from_slice(&self.embedded[index].1);
        match &self.automaton {
            Some(automaton) => {
                for found in automaton.find_overlapping_iter(text) {
                    add(found.pattern().as_usize());
                }
            }
            None => {
                for (index, (secret, _)) in self.embedded.iter().enumerate() {
                    if text.contains(secret.as_str()) {
                        add(index);
                    }
                }
            }
        }
        owners.sort_unstable();
        owners.dedup();
        owners
    }
}

/// What a value may reveal, known while a change is read: the values marked in
/// the change itself, and the values of every root variable (any of which may
/// turn out to be sensitive).
pub(crate) struct Secrets<'a> {
    pub(crate) marked: &'a SecretSet,
    /// Owned by the root variables, indexed in the plan's order (see [`collect_secrets`]).
    pub(crate) variables: &'a SecretSet,
}

impl Secrets<'_> {
    /// Whether `raw` reveals a marked secret or the value of any root variable.
    fn may_hide(&self, raw: &str) -> bool {
        self.marked.reveals(raw) || self.variables.reveals(raw)
    }
}

/// Which root variables turned out to be sensitive, once the plan's
/// `configuration` (written after `resource_changes`) has been read.
pub(crate) struct SensitiveVariables {
    /// Indexed like [`Secrets::variables`].
    pub(crate) sensitive: Vec<bool>,
    /// Values were read before the plan's `variables` (not Terraform's order),
    /// so they were never compared with them: if any root variable is
    /// sensitive, every string, number and key is hidden.
    pub(crate) hide_every_value: bool,
}

/// A value or path rendered into pieces, each string, number and map key kept
/// apart with the root variables it reveals. Terraform writes `configuration`,
/// which says which root variables are sensitive, after the changes, so
/// whether such a piece is hidden is settled only by [`Rendered::finish`]; the
/// comparison itself was made on the raw value, before escaping, and the
/// display cut happens after hiding, so no part of a hidden value is printed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rendered {
    parts: Vec<Part>,
    /// The fewest characters the parts can print, whatever is hidden later.
    min_chars: usize,
    /// The walk stopped early on a long value: what is shown ends with `…`.
    incomplete: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// Punctuation, `null`, booleans: shown as is and cut anywhere.
    Fixed(String),
    /// `(sensitive value)` or `(known after apply)`: never cut in the middle.
    Marker(&'static str),
    /// A string, number or map key that reveals no marked secret. `shown` is
    /// its printed form (escaped; in a value, at most one character over the
    /// display cut, since that is all that can ever be printed of it);
    /// `hidden` is printed instead if it reveals one of the sensitive root
    /// `variables`.
    Value {
        shown: String,
        hidden: &'static str,
        variables: Vec<usize>,
    },
}

impl Part {
    /// The fewest characters this part can print, whatever is hidden later.
    fn min_chars(&self) -> usize {
        match self {
            Part::Fixed(s) => s.chars().count(),
            Part::Marker(m) => m.chars().count(),
            Part::Value { shown, hidden, .. } => shown.chars().count().min(hidden.chars().count()),
        }
    }
}

impl Rendered {
    fn push(&mut self, part: Part) {
        self.min_chars += part.min_chars();
        match (self.parts.last_mut(), part) {
            (Some(Part::Fixed(last)), Part::Fixed(more)) => last.push_str(&more),
            (_, part) => self.parts.push(part),
        }
    }

    fn fixed(&mut self, text: &str) {
        self.push(Part::Fixed(text.to_string()));
    }

    /// Adds a string, number or key: `raw` is compared with the secrets,
    /// `shown` is what prints when none matches.
    fn value(&mut self, raw: &str, shown: String, hidden: &'static str, secrets: &Secrets) {
        if secrets.marked.reveals(raw) {
            self.push(Part::Marker(hidden));
            return;
        }
        let variables = secrets.variables.owners(raw);
        self.push(Part::Value {
            shown,
            hidden,
            variables,
        });
    }

    /// The final text: pieces that reveal a sensitive root variable hidden,
    /// then cut to the display length (`cut`) without splitting a marker.
    pub(crate) fn finish(&self, variables: &SensitiveVariables, cut: bool) -> String {
        let any_sensitive = variables.sensitive.iter().any(|s| *s);
        let mut out = String::new();
        let mut count = 0;
        for part in &self.parts {
            let (text, whole) = match part {
                Part::Fixed(s) => (s.as_str(), false),
                Part::Marker(m) => (*m, true),
                Part::Value {
                    shown,
                    hidden,
                    variables: revealed,
                } => {
                    let hide = (variables.hide_every_value && any_sensitive)
                        || revealed
                            .iter()
                            .any(|&i| variables.sensitive.get(i).copied().unwrap_or(true));
                    if hide {
                        (*hidden, true)
                    } else {
                        (shown.as_str(), false)
                    }
                }
            };
            let n = text.chars().count();
            if cut && count + n > MAX_RENDERED {
                if !whole {
                    out.extend(text.chars().take(MAX_RENDERED - count));
                }
                out.push('…');
                return out;
            }
            out.push_str(text);
            count += n;
        }
        if self.incomplete {
            out.push('…');
        }
        out
    }
}

/// Renders a `replace_paths` path the way Terraform users write it
/// (`tags["team"]`), with every key that could be a secret hidden: keys from
/// the first sensitive step on (a sensitive map's keys are as secret as its
/// values) and keys that reveal a secret.
pub(crate) fn render_path(path: &[PathStep], sensitive: &Value, secrets: &Secrets) -> Rendered {
    let masked_from = (0..path.len())
        .find(|&i| i > 0 && mask_at(sensitive, &path[..i]) == &Value::Bool(true))
        .unwrap_or(path.len());
    let hidden_key = "[(sensitive value)]";
    let mut out = Rendered::default();
    for (i, step) in path.iter().enumerate() {
        match step {
            PathStep::Key(_) if i >= masked_from => out.push(Part::Marker(hidden_key)),
            // The first step is a top-level attribute name, printed bare.
            PathStep::Key(k) if i == 0 => out.value(k, k.clone(), SENSITIVE, secrets),
            PathStep::Key(k) => {
                let shown = if is_identifier(k) {
                    format!(".{k}")
                } else {
                    format!("[{}]", Value::String(k.clone()))
                };
                out.value(k, shown, hidden_key, secrets);
            }
            PathStep::Index(i) => out.fixed(&format!("[{i}]")),
        }
    }
    out
}

/// `shown` cut to one character over the display cut: values are cut anyway,
/// and a huge string need not be kept whole.
fn at_most_shown(shown: String) -> String {
    match shown.char_indices().nth(MAX_RENDERED + 1) {
        Some((end, _)) => shown[..end].to_string(),
        None => shown,
    }
}

/// Renders `value` with `sensitive` and `unknown` masks laid over it; any
/// string, number or map key that reveals one of `secrets` is hidden whole.
pub(crate) fn render(
    value: Option<&Value>,
    sensitive: &Value,
    unknown: &Value,
    secrets: &Secrets,
) -> Rendered {
    let mut out = Rendered::default();
    render_into(&mut out, value, sensitive, unknown, secrets);
    out
}

fn render_into(
    out: &mut Rendered,
    value: Option<&Value>,
    sensitive: &Value,
    unknown: &Value,
    secrets: &Secrets,
) {
    if sensitive == &Value::Bool(true) {
        out.push(Part::Marker(SENSITIVE));
        return;
    }
    if unknown == &Value::Bool(true) {
        out.push(Part::Marker(UNKNOWN));
        return;
    }
    if out.incomplete || out.min_chars > MAX_RENDERED {
        // Enough is there to be cut anyway, whatever is hidden later: stop
        // walking huge values.
        out.incomplete = true;
        return;
    }
    match value {
        None | Some(Value::Null) => out.fixed("null"),
        Some(Value::Array(items)) => {
            out.fixed("[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.fixed(", ");
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
            out.fixed("]");
        }
        Some(Value::Object(map)) => {
            if map.is_empty() {
                out.fixed("{}");
                return;
            }
            out.fixed("{ ");
            // Keys that may be hidden go last: where a hidden key sorts among
            // the others would tell how its secret begins.
            let (open, secret): (Vec<_>, Vec<_>) =
                map.iter().partition(|(key, _)| !secrets.may_hide(key));
            for (i, (key, item)) in open.into_iter().chain(secret).enumerate() {
                if i > 0 {
                    out.fixed(", ");
                }
                let shown = if is_identifier(key) {
                    key.clone()
                } else {
                    Value::String(key.clone()).to_string()
                };
                out.value(key, at_most_shown(shown), SENSITIVE, secrets);
                out.fixed(" = ");
                let step = PathStep::Key(key.clone());
                render_into(
                    out,
                    Some(item),
                    mask_child(sensitive, &step),
                    mask_child(unknown, &step),
                    secrets,
                );
            }
            out.fixed(" }");
        }
        Some(Value::String(s)) => out.value(
            s,
            at_most_shown(Value::String(s.clone()).to_string()),
            SENSITIVE,
            secrets,
        ),
        Some(Value::Number(n)) => {
            let text = n.to_string();
            out.value(&text, at_most_shown(text.clone()), SENSITIVE, secrets);
        }
        Some(scalar) => out.fixed(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// No root variables, and the rendering finished as the report shows it.
    fn show(value: &Value, sensitive: &Value, unknown: &Value, marked: &[String]) -> String {
        let secrets = Secrets {
            marked: &SecretSet::marked(marked.to_vec()),
            variables: &SecretSet::default(),
        };
        render(Some(value), sensitive, unknown, &secrets).finish(&no_variables(), true)
    }

    fn no_variables() -> SensitiveVariables {
        SensitiveVariables {
            sensitive: Vec::new(),
            hide_every_value: false,
        }
    }

    #[test]
    fn masks_cover_nested_values() {
        let value = json!({"a": "open", "b": {"c": "hidden", "d": [1, 2]}});
        let sensitive = json!({"b": {"c": true}});
        let unknown = json!({"b": {"d": [false, true]}});
        assert_eq!(
            show(&value, &sensitive, &unknown, &[]),
            r#"{ a = "open", b = { c = (sensitive value), d = [1, (known after apply)] } }"#
        );
        assert_eq!(show(&value, &json!(true), &json!(false), &[]), SENSITIVE);
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
            show(&value, &sensitive, &json!(false), &secrets),
            r#"{ dsn = (sensitive value), input = (sensitive value), n = (sensitive value), output = (sensitive value), x = (sensitive value) }"#
        );
        let open = json!({"x": "ab", "y": "b"});
        assert_eq!(
            show(&open, &json!(false), &json!(false), &secrets),
            r#"{ x = "ab", y = "b" }"#,
            "a short secret hides only itself"
        );
    }

    #[test]
    fn secrets_are_found_in_raw_text_and_keys_before_escaping() {
        let secret = r#"pa"ss\word"#.to_string();
        let value = json!({"plain": secret, "dsn": format!("pg://u:{secret}@db"), secret.clone(): "v", "list": ["x", secret]});
        let shown = show(&value, &json!(false), &json!(false), &[secret]);
        assert_eq!(
            shown,
            r#"{ dsn = (sensitive value), list = ["x", (sensitive value)], plain = (sensitive value), (sensitive value) = "v" }"#
        );
    }

    /// The comparison [`SecretSet`] compiles, made one secret at a time.
    fn naive_owners(text: &str, owners: &[Vec<String>]) -> Vec<usize> {
        (0..owners.len())
            .filter(|&i| {
                owners[i].iter().any(|secret| {
                    text == secret
                        || (secret.chars().count() >= MIN_EMBEDDED_SECRET
                            && text.contains(secret.as_str()))
                })
            })
            .collect()
    }

    #[test]
    fn secret_sets_find_what_one_search_per_secret_finds() {
        let few = vec![
            vec!["hunter2".to_string(), "ab".to_string()],
            vec![String::new(), "é€😀x".to_string()],
            vec!["hunter2".to_string()],
        ];
        // Enough secrets for the automaton, overlapping ones and repeats
        // across owners among them.
        let mut many: Vec<Vec<String>> = (0..30)
            .map(|i| {
                vec![
                    format!("value-{i:03}"),
                    format!("{i}"),
                    format!("alue-{i:03}x"),
                ]
            })
            .collect();
        many.push(vec![
            "value-00".to_string(),
            "abc".to_string(),
            "ue-0".to_string(),
        ]);
        many.push(vec!["value-007".to_string()]);
        let texts = [
            "",
            "ab",
            "abc",
            "xabcx",
            "hunter2",
            "a hunter2 b",
            "hunter",
            "é€😀x",
            "é€😀",
            "7",
            "12",
            "value-007",
            "pre value-007 post",
            "value-0",
            "alue-012x",
            "value-012x",
            "ue-0",
            "u",
            "value-029 and value-001",
            "nothing here",
        ];
        for owners in [&few, &many] {
            let set = SecretSet::new(owners);
            assert_eq!(set.automaton.is_some(), owners.len() > 3);
            for text in texts {
                let expected = naive_owners(text, owners);
                assert_eq!(set.owners(text), expected, "{text:?}");
                assert_eq!(set.reveals(text), !expected.is_empty(), "{text:?}");
            }
        }
    }

    #[test]
    fn keys_of_a_sensitive_map_are_secrets() {
        let mut secrets = Vec::new();
        collect_secrets(
            &json!({"m": {"k3y-secret": "v"}}),
            &json!({"m": true}),
            &mut secrets,
        );
        assert_eq!(secrets, vec!["k3y-secret".to_string(), "v".to_string()]);
    }

    #[test]
    fn the_cut_never_shows_part_of_a_hidden_value() {
        let long = "x".repeat(150);
        let secret = "s".repeat(300);
        let value = json!([long, secret]);
        let variables = [vec![secret.clone()]];
        let secrets = Secrets {
            marked: &SecretSet::default(),
            variables: &SecretSet::new(&variables),
        };
        let rendered = render(Some(&value), &json!(false), &json!(false), &secrets);
        let hidden = SensitiveVariables {
            sensitive: vec![true],
            hide_every_value: false,
        };
        assert_eq!(
            rendered.finish(&hidden, true),
            format!("[\"{long}\", …"),
            "the marker does not fit and is not split"
        );
        let open = SensitiveVariables {
            sensitive: vec![false],
            hide_every_value: false,
        };
        let shown = rendered.finish(&open, true);
        assert_eq!(shown.chars().count(), MAX_RENDERED + 1);
        assert!(shown.ends_with("ss…"), "{shown}");
    }

    #[test]
    fn a_long_value_hidden_later_still_shows_its_end() {
        // The walk stops once enough is there to be cut; if the long string
        // that made it stop is hidden afterwards, the text must still say
        // that more followed.
        let secret = "s".repeat(400);
        let value = json!([secret, "a", "b"]);
        let variables = [vec![secret.clone()]];
        let secrets = Secrets {
            marked: &SecretSet::default(),
            variables: &SecretSet::new(&variables),
        };
        let rendered = render(Some(&value), &json!(false), &json!(false), &secrets);
        let hidden = SensitiveVariables {
            sensitive: vec![true],
            hide_every_value: false,
        };
        assert_eq!(
            rendered.finish(&hidden, true),
            r#"[(sensitive value), "a", "b"]"#
        );
    }

    #[test]
    fn values_read_before_the_variables_are_all_hidden_when_one_is_sensitive() {
        let rendered = render(
            Some(&json!({"k": "v", "n": 1, "b": true})),
            &json!(false),
            &json!(false),
            &Secrets {
                marked: &SecretSet::default(),
                variables: &SecretSet::default(),
            },
        );
        let late = |sensitive| SensitiveVariables {
            sensitive: vec![sensitive],
            hide_every_value: true,
        };
        assert_eq!(
            rendered.finish(&late(true), true),
            "{ (sensitive value) = true, (sensitive value) = (sensitive value), (sensitive value) = (sensitive value) }",
            "keys too: with values read too early, any of them may be a secret"
        );
        assert_eq!(
            rendered.finish(&late(false), true),
            r#"{ b = true, k = "v", n = 1 }"#
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
        let none = Secrets {
            marked: &SecretSet::default(),
            variables: &SecretSet::default(),
        };
        assert_eq!(
            render_path(&path, &json!(false), &none).finish(&no_variables(), false),
            r#"tags["team name"][0].x"#
        );
        assert_eq!(
            render_path(&path, &json!({"tags": true}), &none).finish(&no_variables(), false),
            "tags[(sensitive value)][0][(sensitive value)]",
            "keys below a sensitive map are hidden"
        );
        let variables = [vec!["team name".to_string()]];
        let secrets = Secrets {
            marked: &SecretSet::default(),
            variables: &SecretSet::new(&variables),
        };
        let hidden = SensitiveVariables {
            sensitive: vec![true],
            hide_every_value: false,
        };
        assert_eq!(
            render_path(&path, &json!(false), &secrets).finish(&hidden, false),
            "tags[(sensitive value)][0].x",
            "a key that is a sensitive variable's value is hidden"
        );
        let long = "k".repeat(300);
        assert_eq!(
            render_path(&[PathStep::Key(long.clone())], &json!(false), &none)
                .finish(&no_variables(), false),
            long,
            "paths are never cut"
        );
        assert_eq!(
            mask_at(&json!({"tags": true}), &path),
            &Value::Bool(true),
            "a sensitive parent covers its children"
        );
    }
}
