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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ParameterKind {
    #[default]
    String,
    Number,
    Bool,
    /// `list(string)`: a JSON array of strings.
    ListOfStrings,
}

impl ParameterKind {
    pub const ALL: [ParameterKind; 4] = [
        ParameterKind::String,
        ParameterKind::Number,
        ParameterKind::Bool,
        ParameterKind::ListOfStrings,
    ];

    /// Its Terraform spelling, as a template writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ParameterKind::String => "string",
            ParameterKind::Number => "number",
            ParameterKind::Bool => "bool",
            ParameterKind::ListOfStrings => "list(string)",
        }
    }
}

impl std::fmt::Display for ParameterKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ParameterKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ParameterKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
            .ok_or_else(|| {
                format!(
                    "type `{}` is not one of string, number, bool, list(string)",
                    shown(text)
                )
            })
    }
}

/// Read and written by name: a stored declaration whose type is none of
/// these fails its read, naming it.
impl Serialize for ParameterKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ParameterKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

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
    pub kind: ParameterKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The value when a build gives none; `None`: the parameter is required.
    pub default: Option<String>,
    pub mutable: bool,
    pub ephemeral: bool,
    /// Hidden from the people its workspaces are shared with.
    pub sensitive: bool,
    /// Allowed values (empty: anything of the right type).
    pub options: Vec<String>,
    pub min: Option<i64>,
    pub max: Option<i64>,
    pub regex: Option<String>,
    /// The direction a number may move (`increasing`, `decreasing`):
    /// enforced by the platform, which knows the previous value.
    pub monotonic: Option<Monotonic>,
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

impl Monotonic {
    pub fn as_str(self) -> &'static str {
        match self {
            Monotonic::Increasing => "increasing",
            Monotonic::Decreasing => "decreasing",
        }
    }
}

impl std::str::FromStr for Monotonic {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "increasing" => Ok(Monotonic::Increasing),
            "decreasing" => Ok(Monotonic::Decreasing),
            other => Err(format!(
                "monotonic must be `increasing` or `decreasing`, not `{}`",
                shown(other)
            )),
        }
    }
}

impl Serialize for Monotonic {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Monotonic {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
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
pub fn typed_value(kind: ParameterKind, value: &str) -> Result<TypedValue, String> {
    match kind {
        ParameterKind::String => Ok(TypedValue::Text(value.to_string())),
        ParameterKind::Number => value
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .map(TypedValue::Number)
            .ok_or_else(|| format!("`{}` is not a number", shown(value))),
        ParameterKind::Bool => match value {
            "true" => Ok(TypedValue::Bool(true)),
            "false" => Ok(TypedValue::Bool(false)),
            _ => Err(format!("`{}` is not `true` or `false`", shown(value))),
        },
        ParameterKind::ListOfStrings => serde_json::from_str::<Vec<String>>(value)
            .map(TypedValue::List)
            .map_err(|_| {
                format!(
                    "`{}` is not a JSON list of strings such as [\"a\",\"b\"]",
                    shown(value)
                )
            }),
    }
}

impl ParameterDefinition {
    /// `self` with the type and monotonic rule a template wrote as text
    /// (`None`: not written; the type is then `string`), parsed, and the
    /// whole declaration checked: the name first (the messages quote it),
    /// then the type and the rule, then the rest
    /// ([`ParameterDefinition::check_declaration`]).
    pub fn declared(
        mut self,
        kind: Option<&str>,
        monotonic: Option<&str>,
    ) -> Result<ParameterDefinition, String> {
        crate::text::check_name_text("parameter", &self.name)?;
        let name = shown(&self.name);
        self.kind = match kind {
            None => ParameterKind::String,
            Some(text) => text
                .parse()
                .map_err(|reason| format!("parameter `{name}`: {reason}"))?,
        };
        self.monotonic = match monotonic {
            None => None,
            Some(text) => Some(
                text.parse()
                    .map_err(|reason| format!("parameter `{name}`: {reason}"))?,
            ),
        };
        self.check_declaration()?;
        Ok(self)
    }

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
        if self.ephemeral && !self.mutable {
            return Err(format!(
                "parameter `{name}`: an ephemeral parameter must also be mutable"
            ));
        }
        let numeric = self.kind == ParameterKind::Number;
        if (self.min.is_some() || self.max.is_some() || self.monotonic.is_some()) && !numeric {
            return Err(format!(
                "parameter `{name}`: min, max and monotonic only apply to type number"
            ));
        }
        if self.regex.is_some() && self.kind != ParameterKind::String {
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
            if self.kind != ParameterKind::ListOfStrings {
                typed_value(self.kind, option)
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

    /// A value that passes the declaration when none is given and it has no
    /// default (a template import plans templates with no workspace): the
    /// first option, else the empty value of its type (the minimum, else 0,
    /// for a number). It may still break a regex: the value is only there to
    /// let the plan go on.
    pub fn placeholder_value(&self) -> String {
        if let Some(first) = self.options.first() {
            return match self.kind {
                ParameterKind::ListOfStrings => {
                    serde_json::Value::from(vec![first.clone()]).to_string()
                }
                _ => first.clone(),
            };
        }
        match self.kind {
            ParameterKind::Number => match (self.min, self.max) {
                (Some(min), _) => min.to_string(),
                (None, Some(max)) if max < 0 => max.to_string(),
                _ => "0".to_string(),
            },
            ParameterKind::Bool => "false".to_string(),
            ParameterKind::ListOfStrings => "[]".to_string(),
            ParameterKind::String => String::new(),
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
    let typed = typed_value(definition.kind, value)?;
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
            kind: ParameterKind::Number,
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
            kind: ParameterKind::String,
            options: vec!["eu".into(), "us".into()],
            ..Default::default()
        };
        let tags = ParameterDefinition {
            kind: ParameterKind::ListOfStrings,
            options: vec!["a".into(), "b".into()],
            ..region.clone()
        };
        let slug = ParameterDefinition {
            kind: ParameterKind::String,
            regex: Some("^[a-z]+$".into()),
            error: Some("lowercase only, got {value}".into()),
            ..Default::default()
        };
        let flag = ParameterDefinition {
            kind: ParameterKind::Bool,
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
                number(Some(5), Some(1), None),
                "min 5 is greater than max 1",
            ),
            (
                ParameterDefinition {
                    name: "x".into(),
                    kind: ParameterKind::Bool,
                    regex: Some("x".into()),
                    ..Default::default()
                },
                "regex only applies to type string",
            ),
            (
                ParameterDefinition {
                    name: "x".into(),
                    kind: ParameterKind::String,
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
                    name: "x".into(),
                    kind: ParameterKind::String,
                    regex: Some("(".into()),
                    ..Default::default()
                },
                "parameter `x`: invalid regex",
            ),
            (
                ParameterDefinition {
                    name: "x".into(),
                    kind: ParameterKind::Number,
                    options: vec!["1".into(), "one".into()],
                    ..Default::default()
                },
                "parameter `x`: option `one` is not a number",
            ),
            (
                ParameterDefinition {
                    name: "x".into(),
                    kind: ParameterKind::String,
                    options: vec!["a".into(), "a".into()],
                    ..Default::default()
                },
                "option value `a` appears twice",
            ),
            (
                ParameterDefinition {
                    kind: ParameterKind::String,
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

    /// The type and monotonic rule as a template wrote them: parsed after
    /// the name is checked, each refusal one line naming the parameter.
    #[test]
    fn declared_types_and_rules_are_parsed_or_refused_by_name() {
        let base = || ParameterDefinition {
            name: "x".into(),
            ..Default::default()
        };
        let declared = base().declared(Some("number"), Some("increasing")).unwrap();
        assert_eq!(
            (declared.kind, declared.monotonic),
            (ParameterKind::Number, Some(Monotonic::Increasing))
        );
        assert_eq!(
            base().declared(None, None).unwrap().kind,
            ParameterKind::String
        );
        let cases: [(ParameterDefinition, Option<&str>, Option<&str>, &str); 5] = [
            (
                base(),
                Some("int"),
                None,
                "parameter `x`: type `int` is not one of",
            ),
            (base(), Some("Number"), None, "type `Number` is not one of"),
            (
                base(),
                Some("number"),
                Some("up"),
                "parameter `x`: monotonic must be `increasing` or `decreasing`, not `up`",
            ),
            (
                base(),
                Some("string"),
                Some("increasing"),
                "min, max and monotonic only apply to type number",
            ),
            (
                ParameterDefinition {
                    name: "bad\u{202e}name".into(),
                    ..Default::default()
                },
                Some("int"),
                None,
                "parameter",
            ),
        ];
        for (definition, kind, monotonic, text) in cases {
            let message = definition.declared(kind, monotonic).unwrap_err();
            assert!(message.contains(text), "{message}");
            assert!(!message.contains('\n'), "{message}");
        }
    }

    /// A stored declaration is read back typed; one whose type or rule is
    /// none the code knows fails the read, naming the value.
    #[test]
    fn stored_declarations_with_unknown_types_fail_their_read() {
        let read = |json: &str| serde_json::from_str::<ParameterDefinition>(json);
        let good = read(r#"{"name":"n","type":"list(string)","monotonic":null}"#).unwrap();
        assert_eq!(good.kind, ParameterKind::ListOfStrings);
        for (json, named) in [
            (r#"{"name":"n","type":"int"}"#, "`int`"),
            (r#"{"name":"n","type":"number","monotonic":"up"}"#, "`up`"),
        ] {
            let error = read(json).unwrap_err().to_string();
            assert!(error.contains(named), "{error}");
        }
    }

    #[test]
    fn placeholders_pass_their_declaration() {
        let declarations = [
            ParameterDefinition {
                name: "s".into(),
                kind: ParameterKind::String,
                ..Default::default()
            },
            number(Some(3), Some(8), None),
            number(None, Some(-2), None),
            number(None, None, None),
            ParameterDefinition {
                name: "b".into(),
                kind: ParameterKind::Bool,
                ..Default::default()
            },
            ParameterDefinition {
                name: "l".into(),
                kind: ParameterKind::ListOfStrings,
                options: vec!["x".into(), "y".into()],
                ..Default::default()
            },
            ParameterDefinition {
                name: "o".into(),
                kind: ParameterKind::Number,
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
            kind: ParameterKind::Number,
            default: Some("2".into()),
            mutable: true,
            options: vec!["2".into(), "4".into()],
            min: Some(1),
            monotonic: Some(Monotonic::Increasing),
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
