//! Small builders for schema attributes, so that every resource states each
//! attribute's type, constraint and description on one line.

use std::collections::HashMap;

use tf_provider::schema::{Attribute, AttributeConstraint, AttributeType, Block, Description};
use tf_provider::value::Value;
use tf_provider::{AttributePath, Diagnostics};

pub(crate) fn string() -> AttributeType {
    AttributeType::String
}
pub(crate) fn number() -> AttributeType {
    AttributeType::Number
}
pub(crate) fn boolean() -> AttributeType {
    AttributeType::Bool
}
pub(crate) fn string_list() -> AttributeType {
    AttributeType::List(Box::new(AttributeType::String))
}
pub(crate) fn string_map() -> AttributeType {
    AttributeType::Map(Box::new(AttributeType::String))
}

fn attribute(
    attr_type: AttributeType,
    constraint: AttributeConstraint,
    description: &str,
) -> Attribute {
    Attribute {
        attr_type,
        description: Description::plain(description),
        constraint,
        sensitive: false,
        deprecated: false,
    }
}

pub(crate) fn required(attr_type: AttributeType, description: &str) -> Attribute {
    attribute(attr_type, AttributeConstraint::Required, description)
}
pub(crate) fn optional(attr_type: AttributeType, description: &str) -> Attribute {
    attribute(attr_type, AttributeConstraint::Optional, description)
}
/// Optional, with a default the provider fills in when the template leaves it out.
pub(crate) fn with_default(attr_type: AttributeType, description: &str) -> Attribute {
    attribute(
        attr_type,
        AttributeConstraint::OptionalComputed,
        description,
    )
}
pub(crate) fn computed(attr_type: AttributeType, description: &str) -> Attribute {
    attribute(attr_type, AttributeConstraint::Computed, description)
}
pub(crate) fn sensitive(mut attribute: Attribute) -> Attribute {
    attribute.sensitive = true;
    attribute
}

pub(crate) fn block(description: &str, attributes: Vec<(&str, Attribute)>) -> Block {
    Block {
        version: 1,
        description: Description::plain(description),
        attributes: attributes
            .into_iter()
            .map(|(name, attribute)| (name.to_string(), attribute))
            .collect::<HashMap<_, _>>(),
        ..Default::default()
    }
}

/// The known value, or `None` when null or not known yet (plan time).
pub(crate) fn known<T>(value: &Value<T>) -> Option<&T> {
    match value {
        Value::Value(inner) => Some(inner),
        _ => None,
    }
}

/// A map whose values may individually be unknown at plan time.
pub(crate) type StringMap = Value<std::collections::BTreeMap<String, Value<String>>>;
/// A list whose elements may individually be unknown at plan time.
pub(crate) type StringList = Value<Vec<Value<String>>>;

/// The whole list, if every element is known and not null.
pub(crate) fn known_list(list: &StringList) -> Option<Vec<String>> {
    known(list)?
        .iter()
        .map(|item| known(item).cloned())
        .collect()
}

/// The whole map, if every value is known; null values are dropped.
pub(crate) fn known_map(map: &StringMap) -> Option<Vec<(String, String)>> {
    match map {
        Value::Null => Some(Vec::new()),
        Value::Unknown => None,
        Value::Value(entries) => {
            let mut pairs = Vec::new();
            for (key, value) in entries {
                match value {
                    Value::Value(text) => pairs.push((key.clone(), text.clone())),
                    Value::Null => {}
                    Value::Unknown => return None,
                }
            }
            Some(pairs)
        }
    }
}

/// Reads the build context, turning an invalid environment into a diagnostic.
pub(crate) fn build_context(diags: &mut Diagnostics) -> Option<abode_contract::BuildContext> {
    match abode_contract::BuildContext::from_env() {
        Ok(context) => Some(context),
        Err(err) => {
            diags.root_error("Invalid Abode build environment", err.to_string());
            None
        }
    }
}

pub(crate) fn attribute_error(diags: &mut Diagnostics, attribute: &'static str, summary: String) {
    diags.error(summary, String::new(), AttributePath::new(attribute));
}
