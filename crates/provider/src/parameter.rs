//! `abode_parameter`: a value the workspace's user chooses (a region, a disk
//! size), declared by the template with its type, options and validation. The
//! value comes from the build (ABODE_PARAMETERS) or the default; an invalid one
//! fails `terraform plan` with the validation's message.
//!
//! `monotonic` needs the previous build's value, which only the platform has:
//! the provider checks the declaration, the platform enforces the direction.

use std::collections::BTreeSet;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tf_provider::schema::{NestedBlock, Schema};
use tf_provider::value::{serde_as_vec, Value, ValueEmpty};
use tf_provider::{DataSource, Diagnostics};

use crate::schema::{
    block, boolean, build_context, computed, known, number, optional, required, string,
    with_default,
};

pub const TYPES: [&str; 4] = ["string", "number", "bool", "list(string)"];

/// A parameter declaration, free of Terraform's null/unknown wrappers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParameterDefinition {
    pub name: String,
    pub kind: String,
    pub default: Option<String>,
    pub mutable: bool,
    pub ephemeral: bool,
    /// Allowed values (empty: anything of the right type).
    pub options: Vec<String>,
    pub min: Option<i64>,
    pub max: Option<i64>,
    pub regex: Option<String>,
    pub monotonic: Option<String>,
    pub error: Option<String>,
}

enum Typed {
    Text(String),
    Number(f64),
    Bool,
    List(Vec<String>),
}

fn typed(kind: &str, value: &str) -> Result<Typed, String> {
    match kind {
        "string" => Ok(Typed::Text(value.to_string())),
        "number" => value
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite())
            .map(Typed::Number)
            .ok_or_else(|| format!("`{value}` is not a number")),
        "bool" => match value {
            "true" | "false" => Ok(Typed::Bool),
            _ => Err(format!("`{value}` is not `true` or `false`")),
        },
        "list(string)" => serde_json::from_str::<Vec<String>>(value)
            .map(Typed::List)
            .map_err(|_| format!("`{value}` is not a JSON list of strings such as [\"a\",\"b\"]")),
        other => Err(format!(
            "type `{other}` is not one of string, number, bool, list(string)"
        )),
    }
}

impl ParameterDefinition {
    /// Problems with the declaration itself, whatever the value.
    pub fn check_declaration(&self) -> Result<(), String> {
        let name = &self.name;
        if !TYPES.contains(&self.kind.as_str()) {
            return Err(format!(
                "parameter `{name}`: type `{}` is not one of string, number, bool, list(string)",
                self.kind
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
        if let Some(monotonic) = &self.monotonic {
            if monotonic != "increasing" && monotonic != "decreasing" {
                return Err(format!(
                    "parameter `{name}`: monotonic must be `increasing` or `decreasing`, not `{monotonic}`"
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
                    "parameter `{name}`: option value `{option}` appears twice"
                ));
            }
            if self.kind != "list(string)" {
                typed(&self.kind, option)
                    .map_err(|reason| format!("parameter `{name}`: option {reason}"))?;
            }
        }
        if let Some(default) = &self.default {
            check_parameter_value(self, default)
                .map_err(|reason| format!("parameter `{name}`: default is invalid: {reason}"))?;
        }
        Ok(())
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
                .replace("{value}", value),
            None => fallback,
        }
    }
}

/// Checks one value against a declaration: type, options, then validation.
pub fn check_parameter_value(definition: &ParameterDefinition, value: &str) -> Result<(), String> {
    let typed = typed(&definition.kind, value)?;
    if !definition.options.is_empty() {
        let allowed = |item: &str| definition.options.iter().any(|option| option == item);
        let chosen: Vec<String> = match &typed {
            Typed::List(items) => items.clone(),
            _ => vec![value.to_string()],
        };
        if let Some(bad) = chosen.iter().find(|item| !allowed(item)) {
            return Err(format!(
                "`{bad}` is not one of the options: {}",
                definition.options.join(", ")
            ));
        }
    }
    match typed {
        Typed::Number(number) => {
            if let Some(min) = definition.min {
                if number < min as f64 {
                    return Err(definition.validation_error(
                        value,
                        format!("{value} is less than the minimum {min}"),
                    ));
                }
            }
            if let Some(max) = definition.max {
                if number > max as f64 {
                    return Err(definition.validation_error(
                        value,
                        format!("{value} is more than the maximum {max}"),
                    ));
                }
            }
        }
        Typed::Text(text) => {
            if let Some(pattern) = &definition.regex {
                let regex = regex::Regex::new(pattern).map_err(|err| err.to_string())?;
                if !regex.is_match(&text) {
                    return Err(definition
                        .validation_error(value, format!("`{value}` does not match {pattern}")));
                }
            }
        }
        Typed::Bool | Typed::List(_) => {}
    }
    Ok(())
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct OptionState {
    name: Value<String>,
    value: Value<String>,
    description: Value<String>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct ValidationState {
    min: Value<i64>,
    max: Value<i64>,
    regex: Value<String>,
    monotonic: Value<String>,
    error: Value<String>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct ParameterState {
    id: Value<String>,
    name: Value<String>,
    display_name: Value<String>,
    description: Value<String>,
    #[serde(rename = "type")]
    kind: Value<String>,
    default: Value<String>,
    mutable: Value<bool>,
    ephemeral: Value<bool>,
    optional: Value<bool>,
    value: Value<String>,
    option: Value<Vec<Value<OptionState>>>,
    #[serde(with = "serde_as_vec")]
    validation: Value<ValidationState>,
}

impl ParameterState {
    /// The declaration, or `None` while part of it is unknown (validate time).
    fn definition(&self) -> Option<ParameterDefinition> {
        let known_opt = |value: &Value<String>| match value {
            Value::Value(text) => Some(Some(text.clone())),
            Value::Null => Some(None),
            Value::Unknown => None,
        };
        let known_flag = |value: &Value<bool>| match value {
            Value::Value(flag) => Some(*flag),
            Value::Null => Some(false),
            Value::Unknown => None,
        };
        let known_num = |value: &Value<i64>| match value {
            Value::Value(n) => Some(Some(*n)),
            Value::Null => Some(None),
            Value::Unknown => None,
        };
        let mut options = Vec::new();
        if let Value::Value(items) = &self.option {
            for item in items {
                options.push(known(&known(item)?.value)?.clone());
            }
        } else if self.option.is_unknown() {
            return None;
        }
        let validation = match &self.validation {
            Value::Value(validation) => Some(validation),
            Value::Null => None,
            Value::Unknown => return None,
        };
        let none = ValidationState::default();
        let rules = validation.unwrap_or(&none);
        Some(ParameterDefinition {
            name: known(&self.name)?.clone(),
            kind: known_opt(&self.kind)?.unwrap_or_else(|| "string".into()),
            default: known_opt(&self.default)?,
            mutable: known_flag(&self.mutable)?,
            ephemeral: known_flag(&self.ephemeral)?,
            options,
            min: known_num(&rules.min)?,
            max: known_num(&rules.max)?,
            regex: known_opt(&rules.regex)?,
            monotonic: known_opt(&rules.monotonic)?,
            error: known_opt(&rules.error)?,
        })
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ParameterDataSource;

#[async_trait]
impl DataSource for ParameterDataSource {
    type State<'a> = ParameterState;
    type ProviderMetaState<'a> = ValueEmpty;

    fn schema(&self, _diags: &mut Diagnostics) -> Option<Schema> {
        let mut schema = block(
            "A value chosen for the workspace by its user. The value comes from the build \
             (ABODE_PARAMETERS) or from `default`; a value that breaks `type`, `option` or \
             `validation` fails the plan with the validation's error.",
            vec![
                ("id", computed(string(), "Same as `name`.")),
                ("name", required(string(), "The parameter's name, unique in the template.")),
                ("display_name", optional(string(), "The name shown to users.")),
                ("description", optional(string(), "Help shown to users.")),
                (
                    "type",
                    with_default(
                        string(),
                        "string (default), number, bool or list(string) (a JSON array of \
                         strings).",
                    ),
                ),
                (
                    "default",
                    optional(
                        string(),
                        "The value when the build gives none; without it the parameter is \
                         required.",
                    ),
                ),
                (
                    "mutable",
                    with_default(
                        boolean(),
                        "Whether the value may change after the workspace is created (default false).",
                    ),
                ),
                (
                    "ephemeral",
                    with_default(
                        boolean(),
                        "Whether the value applies to one build only (default false; needs mutable).",
                    ),
                ),
                ("optional", computed(boolean(), "True when `default` is set.")),
                (
                    "value",
                    computed(
                        string(),
                        "The value for this build, as a string (lists as JSON).",
                    ),
                ),
            ],
        );
        schema.blocks.insert(
            "option".into(),
            NestedBlock::List(block(
                "One allowed value; with options, the value must be one of them (for \
                 list(string), each element must).",
                vec![
                    ("name", required(string(), "The option's label.")),
                    ("value", required(string(), "The option's value.")),
                    ("description", optional(string(), "Help for this option.")),
                ],
            )),
        );
        schema.blocks.insert(
            "validation".into(),
            NestedBlock::Optional(block(
                "Rules the value must follow.",
                vec![
                    ("min", optional(number(), "Smallest allowed number (type number).")),
                    ("max", optional(number(), "Largest allowed number (type number).")),
                    (
                        "regex",
                        optional(string(), "A regular expression the value must match (type string)."),
                    ),
                    (
                        "monotonic",
                        optional(
                            string(),
                            "`increasing` or `decreasing`: the direction later values may take \
                             (type number; enforced by the platform, which knows the previous value).",
                        ),
                    ),
                    (
                        "error",
                        optional(
                            string(),
                            "The message when the value breaks a rule; {min}, {max} and {value} \
                             are replaced.",
                        ),
                    ),
                ],
            )),
        );
        Some(Schema {
            version: 1,
            block: schema,
        })
    }

    async fn validate<'a>(&self, diags: &mut Diagnostics, config: Self::State<'a>) -> Option<()> {
        if let Some(definition) = config.definition() {
            if let Err(message) = definition.check_declaration() {
                diags.root_error_short(message);
            }
        }
        Some(())
    }

    async fn read<'a>(
        &self,
        diags: &mut Diagnostics,
        config: Self::State<'a>,
        _provider_meta_state: Self::ProviderMetaState<'a>,
    ) -> Option<Self::State<'a>> {
        let context = build_context(diags)?;
        let Some(definition) = config.definition() else {
            diags.root_error_short("abode_parameter must be fully known when it is read");
            return None;
        };
        if let Err(message) = definition.check_declaration() {
            diags.root_error_short(message);
            return None;
        }
        let name = definition.name.clone();
        let value = match context
            .parameters
            .get(&name)
            .cloned()
            .or_else(|| definition.default.clone())
        {
            Some(value) => value,
            None => {
                diags.root_error(
                    format!("Parameter `{name}` needs a value"),
                    format!(
                        "It has no default and the build gave none: set a default, or pass it in \
                         {} (a JSON object such as {{\"{name}\": \"...\"}}).",
                        abode_contract::PARAMETERS
                    ),
                );
                return None;
            }
        };
        if let Err(message) = check_parameter_value(&definition, &value) {
            diags.root_error(
                format!("Invalid value for parameter `{name}`: {message}"),
                String::new(),
            );
            return None;
        }
        let mut state = config;
        state.id = name.into();
        state.kind = definition.kind.clone().into();
        state.mutable = definition.mutable.into();
        state.ephemeral = definition.ephemeral.into();
        state.optional = definition.default.is_some().into();
        state.value = value.into();
        Some(state)
    }
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
        ];
        let cpus = number(Some(1), Some(8), None);
        let cpus_msg = number(
            Some(1),
            Some(8),
            Some("between {min} and {max}, not {value}"),
        );
        let more: Vec<(&ParameterDefinition, &str, Result<(), &str>)> = vec![
            (&cpus, "4", Ok(())),
            (&cpus, "2.5", Ok(())),
            (&cpus, "9", Err("9 is more than the maximum 8")),
            (&cpus, "0", Err("0 is less than the minimum 1")),
            (&cpus, "four", Err("`four` is not a number")),
            (&cpus_msg, "12", Err("between 1 and 8, not 12")),
        ];
        for (definition, value, expected) in cases.into_iter().chain(more) {
            let result = check_parameter_value(definition, value);
            match (&result, expected) {
                (Ok(()), Ok(())) => {}
                (Err(message), Err(text)) => assert!(message.contains(text), "{value}: {message}"),
                _ => panic!("{value}: got {result:?}, expected {expected:?}"),
            }
        }
    }

    #[test]
    fn bad_declarations() {
        let cases: Vec<(ParameterDefinition, &str)> = vec![
            (
                ParameterDefinition {
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
                    kind: "bool".into(),
                    regex: Some("x".into()),
                    ..Default::default()
                },
                "regex only applies to type string",
            ),
            (
                ParameterDefinition {
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
        ];
        for (definition, text) in cases {
            let message = definition.check_declaration().unwrap_err();
            assert!(message.contains(text), "{message}");
        }
    }
}
