//! Parameter declarations and the checks of a value against one.
//!
//! A template declares its parameters with `abode_parameter`; the provider
//! checks a build's value at plan time, and the platform checks values when a
//! workspace is created, started or updated, before any build runs. Both must
//! give the same answer, so the declaration and the pure checks live here, in
//! the contract between them. The platform stores declarations as JSON (the
//! serde form of [`ParameterDefinition`]).
//!
//! Values are strings, as in `ABODE_PARAMETERS`: numbers and bools in their
//! Terraform spelling, `list(string)` as a JSON array of strings.
//!
//! Messages name the offending value cut to [`SHOWN_VALUE_CHARS`] characters
//! with line breaks escaped, so that one bad value yields one short line. Other
//! text is kept as given: escaping for a terminal is the display's job (the CLI
//! does it), and a message that changed the value would hide what was sent.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The parameter types a template may declare.
pub const TYPES: [&str; 4] = ["string", "number", "bool", "list(string)"];

/// The most characters of a value (or option, or name) a message repeats.
pub const SHOWN_VALUE_CHARS: usize = 64;

/// The most options a message lists.
const SHOWN_OPTIONS: usize = 10;

/// A parameter declaration, free of Terraform's null/unknown wrappers.
///
/// Serialized with the Terraform attribute names (`type`, not `kind`); absent
/// fields read as their defaults, so declarations stored by an older server
/// still read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ParameterDefinition {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The value when a build gives none; `None`: the parameter is required.
    pub default: Option<String>,
    pub mutable: bool,
    pub ephemeral: bool,
    /// Allowed values (empty: anything of the right type).
    pub options: Vec<String>,
    pub min: Option<i64>,
    pub max: Option<i64>,
    pub regex: Option<String>,
    /// `increasing` or `decreasing` (type number): enforced by the platform,
    /// which knows the previous value.
    pub monotonic: Option<String>,
    /// The message when the value breaks a rule; `{min}`, `{max}` and
    /// `{value}` are replaced.
    pub error: Option<String>,
}

/// The direction a monotonic number parameter may move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Monotonic {
    Increasing,
    Decreasing,
}

/// A value read as its declared type.
#[derive(Debug, Clone, PartialEq)]
pub enum TypedValue {
    Text(String),
    Number(f64),
    Bool(bool),
    List(Vec<String>),
}

/// A value as a message may show it: at most [`SHOWN_VALUE_CHARS`]
/// characters, line breaks escaped (`\n`), `…` when cut.
pub fn shown(value: &str) -> String {
    let mut out = String::new();
    for (index, c) in value.chars().enumerate() {
        if index == SHOWN_VALUE_CHARS {
            out.push('…');
            break;
        }
        if breaks_line(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn breaks_line(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

fn shown_options(options: &[String]) -> String {
    let mut list: Vec<String> = options
        .iter()
        .take(SHOWN_OPTIONS)
        .map(|o| shown(o))
        .collect();
    if options.len() > SHOWN_OPTIONS {
        list.push(format!("… ({} in all)", options.len()));
    }
    list.join(", ")
}

/// Reads `value` as a value of type `kind`.
pub fn typed_value(kind: &str, value: &str) -> Result<TypedValue, String> {
    match kind {
        "string" => Ok(TypedValue::Text(value.to_string())),
        "number" => value
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .map(TypedValue::Number)
            .ok_or_else(|| format!("`{}` is not a number", shown(value))),
        "bool" => match value {
            "true" => Ok(TypedValue::Bool(true)),
            "false" => Ok(TypedValue::Bool(false)),
            _ => Err(format!("`{}` is not `true` or `false`", shown(value))),
        },
        "list(string)" => serde_json::from_str::<Vec<String>>(value)
            .map(TypedValue::List)
            .map_err(|_| {
                format!(
                    "`{}` is not a JSON list of strings such as [\"a\",\"b\"]",
                    shown(value)
                )
            }),
        other => Err(format!(
            "type `{}` is not one of string, number, bool, list(string)",
            shown(other)
        )),
    }
}

impl ParameterDefinition {
    /// Problems with the declaration itself, whatever the value.
    pub fn check_declaration(&self) -> Result<(), String> {
        // First: the messages below quote the name.
        crate::text::check_name_text("parameter", &self.name)?;
        let name = shown(&self.name);
        if let Some(display_name) = &self.display_name {
            crate::text::check_name_text(
                &format!("parameter `{name}`: display name"),
                display_name,
            )?;
        }
        if !TYPES.contains(&self.kind.as_str()) {
            return Err(format!(
                "parameter `{name}`: type `{}` is not one of string, number, bool, list(string)",
                shown(&self.kind)
            ));
        }
        if self.ephemeral && !self.mutable {
            return Err(format!(
                "parameter `{name}`: an ephemeral parameter must also be mutable"
            ));
        }
        let numeric = self.kind == "number";
        if (self.min.is_some() || self.max.is_some() || self.monotonic.is_some()) && !numeric {
            return Err(format!(
                "parameter `{name}`: min, max and monotonic only apply to type number"
            ));
        }
        if self.regex.is_some() && self.kind != "string" {
            return Err(format!(
                "parameter `{name}`: regex only applies to type string"
            ));
        }
        if let (Some(min), Some(max)) = (self.min, self.max) {
            if min > max {
                return Err(format!(
                    "parameter `{name}`: min {min} is greater than max {max}"
                ));
            }
        }
        self.monotonic_direction()?;
        if let Some(pattern) = &self.regex {
            regex::Regex::new(pattern)
                .map_err(|err| format!("parameter `{name}`: invalid regex: {err}"))?;
        }
        let mut seen = BTreeSet::new();
        for option in &self.options {
            if !seen.insert(option) {
                return Err(format!(
                    "parameter `{name}`: option value `{}` appears twice",
                    shown(option)
                ));
            }
            if self.kind != "list(string)" {
                typed_value(&self.kind, option)
                    .map_err(|reason| format!("parameter `{name}`: option {reason}"))?;
            }
        }
        if let Some(default) = &self.default {
            check_parameter_value(self, default)
                .map_err(|reason| format!("parameter `{name}`: default is invalid: {reason}"))?;
        }
        if self.name.is_empty() {
            return Err("a parameter's name must not be empty".to_string());
        }
        Ok(())
    }

    /// The declared direction of a monotonic parameter.
    pub fn monotonic_direction(&self) -> Result<Option<Monotonic>, String> {
        match self.monotonic.as_deref() {
            None => Ok(None),
            Some("increasing") => Ok(Some(Monotonic::Increasing)),
            Some("decreasing") => Ok(Some(Monotonic::Decreasing)),
            Some(other) => Err(format!(
                "parameter `{}`: monotonic must be `increasing` or `decreasing`, not `{}`",
                shown(&self.name),
                shown(other)
            )),
        }
    }

    /// A value that passes the declaration when none is given and it has no
    /// default (a template import plans templates with no workspace): the
    /// first option, else the empty value of its type (the minimum, else 0,
    /// for a number). It may still break a regex: the value is only there to
    /// let the plan go on.
    pub fn placeholder_value(&self) -> String {
        if let Some(first) = self.options.first() {
            return match self.kind.as_str() {
                "list(string)" => serde_json::Value::from(vec![first.clone()]).to_string(),
                _ => first.clone(),
            };
        }
        match self.kind.as_str() {
            "number" => match (self.min, self.max) {
                (Some(min), _) => min.to_string(),
                (None, Some(max)) if max < 0 => max.to_string(),
                _ => "0".to_string(),
            },
            "bool" => "false".to_string(),
            "list(string)" => "[]".to_string(),
            _ => String::new(),
        }
    }

    fn validation_error(&self, value: &str, fallback: String) -> String {
        match &self.error {
            Some(template) => template
                .replace(
                    "{min}",
                    &self.min.map(|n| n.to_string()).unwrap_or_default(),
                )
                .replace(
                    "{max}",
                    &self.max.map(|n| n.to_string()).unwrap_or_default(),
                )
                .replace("{value}", &shown(value)),
            None => fallback,
        }
    }
}

/// Checks one value against a declaration: type, options, then validation.
pub fn check_parameter_value(definition: &ParameterDefinition, value: &str) -> Result<(), String> {
    let typed = typed_value(&definition.kind, value)?;
    if !definition.options.is_empty() {
        let allowed = |item: &str| definition.options.iter().any(|option| option == item);
        let chosen: Vec<String> = match &typed {
            TypedValue::List(items) => items.clone(),
            _ => vec![value.to_string()],
        };
        if let Some(bad) = chosen.iter().find(|item| !allowed(item)) {
            return Err(format!(
                "`{}` is not one of the options: {}",
                shown(bad),
                shown_options(&definition.options)
            ));
        }
    }
    match typed {
        TypedValue::Number(number) => {
            if let Some(min) = definition.min {
                if number < min as f64 {
                    return Err(definition.validation_error(
                        value,
                        format!("{} is less than the minimum {min}", shown(value)),
                    ));
                }
            }
            if let Some(max) = definition.max {
                if number > max as f64 {
                    return Err(definition.validation_error(
                        value,
                        format!("{} is more than the maximum {max}", shown(value)),
                    ));
                }
            }
        }
        TypedValue::Text(text) => {
            if let Some(pattern) = &definition.regex {
                let regex = regex::Regex::new(pattern).map_err(|err| err.to_string())?;
                if !regex.is_match(&text) {
                    return Err(definition.validation_error(
                        value,
                        format!("`{}` does not match {}", shown(value), shown(pattern)),
                    ));
                }
            }
        }
        TypedValue::Bool(_) | TypedValue::List(_) => {}
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn number(min: Option<i64>, max: Option<i64>, error: Option<&str>) -> ParameterDefinition {
        ParameterDefinition {
            name: "cpus".into(),
            kind: "number".into(),
            min,
            max,
            error: error.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn values_against_declarations() {
        let region = ParameterDefinition {
            name: "region".into(),
            kind: "string".into(),
            options: vec!["eu".into(), "us".into()],
            ..Default::default()
        };
        let tags = ParameterDefinition {
            kind: "list(string)".into(),
            options: vec!["a".into(), "b".into()],
            ..region.clone()
        };
        let slug = ParameterDefinition {
            kind: "string".into(),
            regex: Some("^[a-z]+$".into()),
            error: Some("lowercase only, got {value}".into()),
            ..Default::default()
        };
        let flag = ParameterDefinition {
            kind: "bool".into(),
            ..Default::default()
        };
        let cpus = number(Some(1), Some(8), None);
        let cpus_msg = number(
            Some(1),
            Some(8),
            Some("between {min} and {max}, not {value}"),
        );
        let long = "x".repeat(10_000);
        let cases: Vec<(&ParameterDefinition, &str, Result<(), &str>)> = vec![
            (&region, "eu", Ok(())),
            (
                &region,
                "mars",
                Err("`mars` is not one of the options: eu, us"),
            ),
            (&tags, "[\"a\",\"b\"]", Ok(())),
            (&tags, "[\"a\",\"c\"]", Err("`c` is not one of the options")),
            (&tags, "a", Err("is not a JSON list of strings")),
            (&slug, "abc", Ok(())),
            (&slug, "ABC", Err("lowercase only, got ABC")),
            (&slug, "a\nb", Err("lowercase only, got a\\nb")),
            (&flag, "true", Ok(())),
            (&flag, "True", Err("`True` is not `true` or `false`")),
            (&flag, "1", Err("`1` is not `true` or `false`")),
            (&cpus, "4", Ok(())),
            (&cpus, "2.5", Ok(())),
            (&cpus, "9", Err("9 is more than the maximum 8")),
            (&cpus, "0", Err("0 is less than the minimum 1")),
            (&cpus, "four", Err("`four` is not a number")),
            (&cpus, "NaN", Err("`NaN` is not a number")),
            (&cpus, "inf", Err("`inf` is not a number")),
            (&cpus_msg, "12", Err("between 1 and 8, not 12")),
            (&region, &long, Err("is not one of the options")),
        ];
        for (definition, value, expected) in cases {
            let result = check_parameter_value(definition, value);
            match (&result, expected) {
                (Ok(()), Ok(())) => {}
                (Err(message), Err(text)) => {
                    assert!(message.contains(text), "{value}: {message}");
                    assert!(message.chars().count() < 200, "{message}");
                    assert!(!message.contains('\n'), "{message}");
                }
                _ => panic!("{value}: got {result:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn shown_values_stay_on_one_line() {
        let cases: &[(&str, &str)] = &[
            ("plain", "plain"),
            ("a\nb\r\nc", "a\\nb\\r\\nc"),
            ("tab\there \x1b[2J", "tab\there \x1b[2J"),
            ("line\u{2028}sep", "line\\u{2028}sep"),
        ];
        for (value, expected) in cases {
            assert_eq!(shown(value), *expected);
        }
        let long = "é".repeat(SHOWN_VALUE_CHARS + 1);
        assert_eq!(shown(&long), format!("{}…", "é".repeat(SHOWN_VALUE_CHARS)));
        assert_eq!(
            shown(&"é".repeat(SHOWN_VALUE_CHARS)),
            "é".repeat(SHOWN_VALUE_CHARS)
        );
    }

    #[test]
    fn bad_declarations() {
        let cases: Vec<(ParameterDefinition, &str)> = vec![
            (
                ParameterDefinition {
                    name: "x".into(),
                    kind: "int".into(),
                    ..Default::default()
                },
                "type `int` is not one of",
            ),
            (
                number(Some(5), Some(1), None),
                "min 5 is greater than max 1",
            ),
            (
                ParameterDefinition {
                    name: "x".into(),
                    kind: "bool".into(),
                    regex: Some("x".into()),
                    ..Default::default()
                },
                "regex only applies to type string",
            ),
            (
                ParameterDefinition {
                    name: "x".into(),
                    kind: "string".into(),
                    ephemeral: true,
                    ..Default::default()
                },
                "must also be mutable",
            ),
            (
                ParameterDefinition {
                    default: Some("20".into()),
                    ..number(None, Some(10), None)
                },
                "default is invalid: 20 is more than the maximum 10",
            ),
            (
                ParameterDefinition {
                    monotonic: Some("up".into()),
                    ..number(None, None, None)
                },
                "monotonic must be `increasing` or `decreasing`",
            ),
            (
                ParameterDefinition {
                    name: "x".into(),
                    kind: "string".into(),
                    regex: Some("(".into()),
                    ..Default::default()
                },
                "parameter `x`: invalid regex",
            ),
            (
                ParameterDefinition {
                    name: "x".into(),
                    kind: "number".into(),
                    options: vec!["1".into(), "one".into()],
                    ..Default::default()
                },
                "parameter `x`: option `one` is not a number",
            ),
            (
                ParameterDefinition {
                    name: "x".into(),
                    kind: "string".into(),
                    options: vec!["a".into(), "a".into()],
                    ..Default::default()
                },
                "option value `a` appears twice",
            ),
            (
                ParameterDefinition {
                    kind: "string".into(),
                    ..Default::default()
                },
                "name must not be empty",
            ),
        ];
        for (definition, text) in cases {
            let message = definition.check_declaration().unwrap_err();
            assert!(message.contains(text), "{message}");
        }
    }

    #[test]
    fn placeholders_pass_their_declaration() {
        let declarations = [
            ParameterDefinition {
                name: "s".into(),
                kind: "string".into(),
                ..Default::default()
            },
            number(Some(3), Some(8), None),
            number(None, Some(-2), None),
            number(None, None, None),
            ParameterDefinition {
                name: "b".into(),
                kind: "bool".into(),
                ..Default::default()
            },
            ParameterDefinition {
                name: "l".into(),
                kind: "list(string)".into(),
                options: vec!["x".into(), "y".into()],
                ..Default::default()
            },
            ParameterDefinition {
                name: "o".into(),
                kind: "number".into(),
                options: vec!["7".into()],
                ..Default::default()
            },
        ];
        for declaration in declarations {
            let value = declaration.placeholder_value();
            check_parameter_value(&declaration, &value)
                .unwrap_or_else(|message| panic!("{}: {message}", declaration.name));
        }
    }

    #[test]
    fn declarations_round_trip_through_json() {
        let declaration = ParameterDefinition {
            name: "cpus".into(),
            kind: "number".into(),
            default: Some("2".into()),
            mutable: true,
            options: vec!["2".into(), "4".into()],
            min: Some(1),
            monotonic: Some("increasing".into()),
            ..Default::default()
        };
        let json = serde_json::to_string(&declaration).unwrap();
        assert!(json.contains("\"type\":\"number\""), "{json}");
        let back: ParameterDefinition = serde_json::from_str(&json).unwrap();
        assert_eq!(back, declaration);
        let sparse: ParameterDefinition =
            serde_json::from_str(r#"{"name":"a","type":"string"}"#).unwrap();
        assert_eq!(sparse.default, None);
        assert!(!sparse.mutable);
    }
}
