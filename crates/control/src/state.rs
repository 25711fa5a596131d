//! What Abode reads from a stored Terraform state: its managed resource
//! instances, each with the address parts Terraform gives it. Agents are
//! found there after a start, and an orphaned workspace lists what may still
//! exist; both walk the state the same way.

use serde_json::Value;

/// One managed resource instance of a state.
pub struct Instance<'a> {
    pub module: Option<&'a str>,
    pub resource_type: &'a str,
    pub name: &'a str,
    index_key: Option<&'a Value>,
    /// The instance object (`attributes`, `index_key`, ...).
    pub object: &'a Value,
    /// The resource object it is an instance of (`type`, `provider`, ...).
    pub resource: &'a Value,
}

impl Instance<'_> {
    /// `[0]` or `["key"]`, empty for a single instance.
    pub fn index_suffix(&self) -> String {
        match self.index_key {
            Some(Value::Number(n)) => format!("[{n}]"),
            Some(Value::String(key)) => format!("[\"{key}\"]"),
            _ => String::new(),
        }
    }

    /// The resource address, `module.m.type.name["key"]`.
    pub fn address(&self) -> String {
        let base = format!(
            "{}.{}{}",
            self.resource_type,
            self.name,
            self.index_suffix()
        );
        match self.module {
            Some(module) => format!("{module}.{base}"),
            None => base,
        }
    }
}

fn text<'a>(value: &'a Value, field: &str) -> Option<&'a str> {
    value.get(field).and_then(Value::as_str)
}

/// Every managed resource instance of a parsed state.
pub fn managed_instances(state: &Value) -> Vec<Instance<'_>> {
    let mut instances = Vec::new();
    let resources = state.get("resources").and_then(Value::as_array);
    for resource in resources.into_iter().flatten() {
        if text(resource, "mode") != Some("managed") {
            continue;
        }
        let objects = resource.get("instances").and_then(Value::as_array);
        for object in objects.into_iter().flatten() {
            instances.push(Instance {
                module: text(resource, "module"),
                resource_type: text(resource, "type").unwrap_or(""),
                name: text(resource, "name").unwrap_or(""),
                index_key: object.get("index_key"),
                object,
                resource,
            });
        }
    }
    instances
}
