//! `abode_parameter`: a value the workspace's user chooses (a region, a disk
//! size), declared by the template with its type, options and validation. The
//! value comes from the build (ABODE_PARAMETERS) or the default; an invalid one
//! fails `terraform plan` with the validation's message.
//!
//! `monotonic` needs the previous build's value, which only the platform has:
//! the provider checks the declaration, the platform enforces the direction.
//! The declaration and its checks are the environment contract's
//! (`abode_contract::parameters`), shared with the platform, which checks
//! values before a build is accepted. In a template import (the platform
//! planning a template at push, with no workspace) a parameter with neither
//! value nor default reads as a placeholder instead of failing the plan.

pub use abode_contract::parameters::{check_parameter_value, ParameterDefinition};
use serde::{Deserialize, Serialize};
use tf_provider::schema::{Block, NestedBlock};
use tf_provider::value::{serde_as_vec, Value};
use tf_provider::Diagnostics;

use crate::plumbing::DataSourceType;
use crate::schema::{
    block, boolean, build_context, computed, known, number, optional, required, string,
    with_default,
};

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
    sensitive: Value<bool>,
    optional: Value<bool>,
    value: Value<String>,
    option: Value<Vec<Value<OptionState>>>,
    #[serde(with = "serde_as_vec")]
    validation: Value<ValidationState>,
}

impl ParameterState {
    /// The declaration, parsed and checked (one line when it is not a
    /// valid one), or `None` while part of it is unknown (validate time).
    fn definition(&self) -> Option<Result<ParameterDefinition, String>> {
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
        let kind = known_opt(&self.kind)?;
        let monotonic = known_opt(&rules.monotonic)?;
        let definition = ParameterDefinition {
            name: known(&self.name)?.clone(),
            display_name: known_opt(&self.display_name)?,
            description: known_opt(&self.description)?,
            default: known_opt(&self.default)?,
            mutable: known_flag(&self.mutable)?,
            ephemeral: known_flag(&self.ephemeral)?,
            sensitive: known_flag(&self.sensitive)?,
            options,
            min: known_num(&rules.min)?,
            max: known_num(&rules.max)?,
            regex: known_opt(&rules.regex)?,
            error: known_opt(&rules.error)?,
            ..ParameterDefinition::default()
        };
        Some(definition.declared(kind.as_deref(), monotonic.as_deref()))
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ParameterDataSource;

impl DataSourceType for ParameterDataSource {
    type State = ParameterState;

    fn block(&self) -> Block {
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
                (
                    "sensitive",
                    with_default(
                        boolean(),
                        "Whether the value is kept from the people the workspace is shared \
                         with (default false): they see the parameter without its value.",
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
        schema
    }

    fn check(&self, diags: &mut Diagnostics, config: &Self::State) {
        if let Some(Err(message)) = config.definition() {
            diags.root_error_short(message);
        }
    }

    fn read(&self, diags: &mut Diagnostics, config: Self::State) -> Option<Self::State> {
        let context = build_context(diags)?;
        let definition = match config.definition() {
            Some(Ok(definition)) => definition,
            Some(Err(message)) => {
                diags.root_error_short(message);
                return None;
            }
            None => {
                diags.root_error_short("abode_parameter must be fully known when it is read");
                return None;
            }
        };
        let name = definition.name.clone();
        let placeholder = context.template_import
            && definition.default.is_none()
            && !context.parameters.contains_key(&name);
        let value = match context
            .parameters
            .get(&name)
            .cloned()
            .or_else(|| definition.default.clone())
        {
            Some(value) => value,
            // The platform reads declarations, not values: the plan must go on.
            None if context.template_import => definition.placeholder_value(),
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
        // A placeholder may break a regex; it only lets the import's plan go on.
        let checked = if placeholder {
            Ok(())
        } else {
            check_parameter_value(&definition, &value)
        };
        if let Err(message) = checked {
            diags.root_error(
                format!("Invalid value for parameter `{name}`: {message}"),
                String::new(),
            );
            return None;
        }
        let mut state = config;
        state.id = name.into();
        state.kind = definition.kind.as_str().to_string().into();
        state.mutable = definition.mutable.into();
        state.ephemeral = definition.ephemeral.into();
        state.sensitive = definition.sensitive.into();
        state.optional = definition.default.is_some().into();
        state.value = value.into();
        Some(state)
    }
}
