//! A build's daily cost, read from the same plan JSON the guard judges.
//!
//! Templates say what their resources cost with `abode_metadata { resource_id
//! = X.id  daily_cost = N }`. What a workspace costs after a build is the sum
//! of the `daily_cost` of the metadata attached to resources that would
//! *exist after the plan is applied*: a stop that removes the compute (its
//! `count` follows the transition) stops charging it and keeps charging the
//! volume; a delete charges nothing. Quotas compare this number with a
//! person's budget before anything is applied, so it must come from the plan
//! and nothing else.
//!
//! The crate is pure (no files, clock, network): bytes in, a [`Cost`] or a
//! one-line [`CostError`] out. A cost it cannot read exactly (negative,
//! fractional, unknown until apply, too large) is an error, never a guess:
//! a quota judged on a guess would either refuse wrongly or let a build past
//! its budget.
//!
//! Which resource a metadata describes is read from the plan's
//! `configuration` (the references of its `resource_id`), the way Terraform
//! itself knows it, because at plan time a new resource's `id` is unknown.
//! A metadata whose `resource_id` leads to no managed resource in its own
//! module (a literal, a variable, a module output) describes something
//! outside Terraform's view: it is charged while the metadata itself exists.
//!
//! A literal index in a `resource_id` picks that instance, else the metadata's
//! own `count` or `for_each` key. Only `resource_changes` and `configuration`
//! are read; every other resource's `after` is skipped unbuilt (`RawValue`),
//! and only what exists after the plan is read, so a hostile cost on something
//! going away costs nothing. Too large means past `i64::MAX`, what the store
//! keeps. The tests are a table of plans described in a line per resource, with
//! totals worked out by hand.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// The resource type whose `daily_cost` is summed.
pub const METADATA_TYPE: &str = "abode_metadata";

/// Largest total accepted: what the store keeps (a signed 64-bit integer).
pub const MAX_COST: u64 = i64::MAX as u64;

/// What a build's plan costs per day once applied.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cost {
    /// The sum of [`Cost::items`].
    pub total: u64,
    /// Each charged metadata, in plan order.
    pub items: Vec<Item>,
}

/// One charged `abode_metadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The metadata's instance address (`abode_metadata.compute[0]`).
    pub metadata: String,
    /// The resource it describes, when the configuration names one
    /// (`module.m.docker_container.ws`).
    pub resource: Option<String>,
    pub daily_cost: u64,
}

impl Cost {
    /// `5 a day (abode_metadata.compute for docker_container.ws: 4; ...)`.
    pub fn describe(&self) -> String {
        if self.items.is_empty() {
            return format!("{} a day", self.total);
        }
        let parts: Vec<String> = self
            .items
            .iter()
            .map(|item| match &item.resource {
                Some(resource) => {
                    format!("{} for {resource}: {}", item.metadata, item.daily_cost)
                }
                None => format!("{}: {}", item.metadata, item.daily_cost),
            })
            .collect();
        format!("{} a day ({})", self.total, parts.join("; "))
    }
}

/// Why a plan's cost cannot be told. One line each, naming the metadata.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CostError {
    #[error("cannot read the plan for its cost: {0}")]
    Plan(String),
    #[error("{address}: daily_cost {value} is negative; a cost is 0 or more")]
    Negative { address: String, value: String },
    #[error("{address}: daily_cost {value} is not a whole number")]
    NotInteger { address: String, value: String },
    #[error("{address}: daily_cost is not a number ({value})")]
    NotNumber { address: String, value: String },
    #[error("{address}: daily_cost is known only after apply; a quota needs it at plan time")]
    Unknown { address: String },
    #[error("the daily cost is larger than {MAX_COST} (at {address})")]
    TooLarge { address: String },
}

#[derive(Deserialize)]
struct PlanDoc {
    #[serde(default)]
    resource_changes: Vec<Change>,
    #[serde(default)]
    configuration: Option<Configuration>,
}

#[derive(Deserialize)]
struct Change {
    address: String,
    #[serde(default)]
    module_address: Option<String>,
    #[serde(default)]
    mode: Option<String>,
    #[serde(rename = "type")]
    resource_type: String,
    name: String,
    #[serde(default)]
    index: Option<Value>,
    #[serde(default)]
    deposed: Option<String>,
    change: ChangeBody,
}

#[derive(Deserialize)]
struct ChangeBody {
    #[serde(default)]
    after: Option<Box<RawValue>>,
    #[serde(default)]
    after_unknown: Option<Box<RawValue>>,
}

#[derive(Deserialize, Default)]
struct Configuration {
    #[serde(default)]
    root_module: Option<ModuleConfig>,
}

#[derive(Deserialize, Default)]
struct ModuleConfig {
    #[serde(default)]
    resources: Vec<ResourceConfig>,
    #[serde(default)]
    module_calls: BTreeMap<String, ModuleCall>,
}

#[derive(Deserialize)]
struct ModuleCall {
    #[serde(default)]
    module: Option<ModuleConfig>,
}

#[derive(Deserialize)]
struct ResourceConfig {
    address: String,
    /// Kept raw: an attribute's expression is an object, a nested block's
    /// a list of them (`prebuilds { ... }`, `ports { ... }`), and only
    /// `resource_id` is read.
    #[serde(default)]
    expressions: BTreeMap<String, Box<RawValue>>,
}

#[derive(Deserialize)]
struct Expression {
    #[serde(default)]
    references: Vec<String>,
}

/// What the metadata's `after` holds that matters here.
#[derive(Deserialize)]
struct MetadataAfter {
    #[serde(default)]
    daily_cost: Option<Value>,
}

#[derive(Deserialize)]
struct MetadataUnknown {
    #[serde(default)]
    daily_cost: Option<Value>,
}

impl Change {
    /// Whether this object is still there once the plan is applied: a
    /// managed resource (not a deposed object) with a state after. Delete
    /// and forget leave no `after`; create, update, replace and no-op do.
    fn exists_after(&self) -> bool {
        self.mode.as_deref().unwrap_or("managed") == "managed"
            && self.deposed.is_none()
            && self
                .change
                .after
                .as_ref()
                .is_some_and(|after| after.get().trim() != "null")
    }

    fn module(&self) -> &str {
        self.module_address.as_deref().unwrap_or("")
    }
}

/// The reference of a `resource_id` to a managed resource of the same
/// module: its type, name and index when written literally.
#[derive(Debug, PartialEq)]
struct Target {
    resource_type: String,
    name: String,
    index: Option<Value>,
}

const NOT_RESOURCES: &[&str] = &[
    "var",
    "local",
    "each",
    "count",
    "data",
    "module",
    "path",
    "terraform",
    "self",
];

/// `docker_container.ws[0].id` -> type, name, index 0. `None` for anything
/// that is not a managed resource (variables, locals, data sources, module
/// outputs).
fn parse_target(reference: &str) -> Option<Target> {
    let (resource_type, rest) = reference.split_once('.')?;
    if NOT_RESOURCES.contains(&resource_type) || resource_type.is_empty() {
        return None;
    }
    let end = rest.find(['.', '[']).unwrap_or(rest.len());
    let name = &rest[..end];
    if name.is_empty() {
        return None;
    }
    let after = &rest[end..];
    let index = after
        .strip_prefix('[')
        .and_then(|inner| inner.split_once(']'))
        .and_then(|(inside, _)| serde_json::from_str::<Value>(inside).ok());
    Some(Target {
        resource_type: resource_type.to_string(),
        name: name.to_string(),
        index,
    })
}

/// `module.a[0].module.b["x"]` -> `["a", "b"]`: the configuration's path.
fn config_path(module_address: &str) -> Vec<String> {
    let mut path = Vec::new();
    let mut rest = module_address;
    while let Some(after) = rest.strip_prefix("module.") {
        let end = after.find(['.', '[']).unwrap_or(after.len());
        path.push(after[..end].to_string());
        rest = &after[end..];
        if rest.starts_with('[') {
            // Skip the instance key, which may itself hold dots or brackets
            // inside a quoted string.
            let mut quoted = false;
            let mut escaped = false;
            let mut close = rest.len();
            for (at, ch) in rest.char_indices() {
                match ch {
                    _ if escaped => escaped = false,
                    '\\' if quoted => escaped = true,
                    '"' => quoted = !quoted,
                    ']' if !quoted => {
                        close = at + 1;
                        break;
                    }
                    _ => {}
                }
            }
            rest = &rest[close..];
        }
        rest = rest.strip_prefix('.').unwrap_or(rest);
    }
    path
}

fn module_config<'a>(root: &'a ModuleConfig, path: &[String]) -> Option<&'a ModuleConfig> {
    let mut module = root;
    for step in path {
        module = module.module_calls.get(step)?.module.as_ref()?;
    }
    Some(module)
}

/// The resource a metadata's `resource_id` refers to, from the
/// configuration: the first reference that names a managed resource.
fn target_of(config: Option<&Configuration>, change: &Change) -> Option<Target> {
    let root = config?.root_module.as_ref()?;
    let module = module_config(root, &config_path(change.module()))?;
    let local = format!("{}.{}", change.resource_type, change.name);
    let resource = module.resources.iter().find(|r| r.address == local)?;
    let expression: Expression =
        serde_json::from_str(resource.expressions.get("resource_id")?.get()).ok()?;
    expression
        .references
        .iter()
        .find_map(|reference| parse_target(reference))
}

/// Whether the target would exist after the plan. An index written in the
/// reference picks that instance; otherwise the metadata's own index when
/// the target has an instance of it (`count`/`for_each` side by side);
/// otherwise any instance.
fn target_exists(changes: &[Change], metadata: &Change, target: &Target) -> bool {
    let instances: Vec<&Change> = changes
        .iter()
        .filter(|c| {
            c.mode.as_deref().unwrap_or("managed") == "managed"
                && c.module() == metadata.module()
                && c.resource_type == target.resource_type
                && c.name == target.name
                && c.deposed.is_none()
        })
        .collect();
    let index = match (&target.index, &metadata.index) {
        (Some(index), _) => Some(index),
        (None, Some(own)) if instances.iter().any(|c| c.index.as_ref() == Some(own)) => Some(own),
        _ => None,
    };
    instances
        .iter()
        .filter(|c| index.is_none() || c.index.as_ref() == index)
        .any(|c| c.exists_after())
}

fn target_address(metadata: &Change, target: &Target) -> String {
    let mut address = String::new();
    if !metadata.module().is_empty() {
        address.push_str(metadata.module());
        address.push('.');
    }
    address.push_str(&target.resource_type);
    address.push('.');
    address.push_str(&target.name);
    if let Some(index) = &target.index {
        address.push_str(&format!("[{index}]"));
    }
    address
}

/// The metadata's cost as a whole number of 0 or more.
fn read_cost(change: &Change) -> Result<u64, CostError> {
    let address = || change.address.clone();
    if let Some(unknown) = &change.change.after_unknown {
        if let Ok(unknown) = serde_json::from_str::<MetadataUnknown>(unknown.get()) {
            if unknown
                .daily_cost
                .is_some_and(|known| known != Value::Bool(false))
            {
                return Err(CostError::Unknown { address: address() });
            }
        }
    }
    let Some(after) = &change.change.after else {
        return Ok(0);
    };
    let after: MetadataAfter = serde_json::from_str(after.get())
        .map_err(|error| CostError::Plan(format!("{}: {error}", change.address)))?;
    let value = match after.daily_cost {
        None | Some(Value::Null) => return Ok(0),
        Some(Value::Number(number)) => number,
        Some(other) => {
            return Err(CostError::NotNumber {
                address: address(),
                value: other.to_string(),
            })
        }
    };
    if let Some(cost) = value.as_u64() {
        if cost > MAX_COST {
            return Err(CostError::TooLarge { address: address() });
        }
        return Ok(cost);
    }
    if value.as_i64().is_some() {
        return Err(CostError::Negative {
            address: address(),
            value: value.to_string(),
        });
    }
    // A float: Terraform writes whole numbers without a fraction, so a
    // float here is fractional or beyond 64 bits.
    let float = value.as_f64().unwrap_or(f64::NAN);
    if float < 0.0 {
        return Err(CostError::Negative {
            address: address(),
            value: value.to_string(),
        });
    }
    if float.is_finite() && float.fract() == 0.0 {
        return Err(CostError::TooLarge { address: address() });
    }
    Err(CostError::NotInteger {
        address: address(),
        value: value.to_string(),
    })
}

/// The daily cost of what the plan leaves behind.
pub fn daily_cost(plan_json: &[u8]) -> Result<Cost, CostError> {
    // serde reads a struct from an array too; a plan is an object.
    if !plan_json.trim_ascii_start().starts_with(b"{") {
        return Err(CostError::Plan("a plan is a JSON object".to_string()));
    }
    let plan: PlanDoc =
        serde_json::from_slice(plan_json).map_err(|error| CostError::Plan(error.to_string()))?;
    let mut cost = Cost::default();
    for change in &plan.resource_changes {
        if change.resource_type != METADATA_TYPE || !change.exists_after() {
            continue;
        }
        let target = target_of(plan.configuration.as_ref(), change);
        let charged = match &target {
            Some(target) => target_exists(&plan.resource_changes, change, target),
            None => true,
        };
        if !charged {
            continue;
        }
        let daily = read_cost(change)?;
        cost.total = cost
            .total
            .checked_add(daily)
            .filter(|total| *total <= MAX_COST)
            .ok_or_else(|| CostError::TooLarge {
                address: change.address.clone(),
            })?;
        cost.items.push(Item {
            metadata: change.address.clone(),
            resource: target.as_ref().map(|t| target_address(change, t)),
            daily_cost: daily,
        });
    }
    Ok(cost)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_their_resource() {
        let t = parse_target("docker_container.ws[0].id").unwrap();
        assert_eq!(t.resource_type, "docker_container");
        assert_eq!(t.name, "ws");
        assert_eq!(t.index, Some(Value::from(0)));
        let t = parse_target("abode_volume.v[\"a.b\"]").unwrap();
        assert_eq!(t.index, Some(Value::from("a.b")));
        assert!(parse_target("var.x").is_none());
        assert!(parse_target("module.m.id").is_none());
        assert!(parse_target("data.x.y.id").is_none());
    }

    #[test]
    fn module_addresses_become_configuration_paths() {
        assert_eq!(config_path(""), Vec::<String>::new());
        assert_eq!(config_path("module.a"), vec!["a"]);
        assert_eq!(
            config_path("module.a[0].module.b[\"x].module.c\"]"),
            vec!["a", "b"]
        );
    }
}
