//! Properties that must hold for every plan, not just the fixtures: the guard's
//! decision on every transition, whoever asked for it, is exactly what
//! docs/plan-check.md says; a delete that retains resources never destroys
//! one of them without blocking, and judges everything else as before; and no
//! secret reaches any output, whatever its characters, length, place and marks,
//! in every plan format the guard reads (0.1 and 0.2 of Terraform 0.12 to 1.0,
//! and 1.x), each with only the fields its format has.
//!
//! The oracles here are deliberately independent of the guard: plans are built
//! from a small model (resources, rules, `abode_protect` annotations) and the
//! expected decision is computed from the model with a matcher written in this
//! file, never with `Rule::covers` or anything else from `abode_guard` that
//! matches or resolves. Secrets are looked for in the outputs directly.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use abode_guard::{Address, BuildIntent, Decision, Initiator, Mode, Origin, Rule};
use proptest::prelude::*;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

// ---------------------------------------------------------------------------
// The model: where resources live and what protects them.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Index(u8),
    Name(&'static str),
}

impl Key {
    fn text(self) -> String {
        match self {
            Key::Index(i) => format!("[{i}]"),
            Key::Name(n) => format!("[\"{n}\"]"),
        }
    }
}

/// How a resource (or module call) is repeated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Repeat {
    Single,
    Count,
    ForEach,
}

impl Repeat {
    fn key(self, pick: bool) -> Option<Key> {
        match self {
            Repeat::Single => None,
            Repeat::Count => Some(Key::Index(u8::from(pick))),
            Repeat::ForEach => Some(Key::Name(if pick { "b" } else { "a" })),
        }
    }
}

/// Module calls: a plain one, one with `count`, one with `for_each`.
const MODULES: &[(&str, Repeat)] = &[
    ("single", Repeat::Single),
    ("home", Repeat::Count),
    ("work", Repeat::ForEach),
];

/// Resource blocks (the same in the root and in every module).
const RESOURCES: &[(&str, &str, Repeat)] = &[
    ("terraform_data", "disk", Repeat::Single),
    ("terraform_data", "vols", Repeat::ForEach),
    ("abode_volume", "home", Repeat::Count),
    ("docker_volume", "cache", Repeat::Single),
    // Abode's pure annotations: never protected changes, whatever the rules.
    ("abode_protect", "extra", Repeat::Single),
    ("abode_metadata", "info", Repeat::Single),
];

const ACTIONS: &[&[&str]] = &[
    &["no-op"],
    &["create"],
    &["update"],
    &["delete"],
    &["delete", "create"],
    &["create", "delete"],
    &["forget"],
    &["read"],
];

const CREATE: &[&str] = &["create"];
const DELETE: &[&str] = &["delete"];

/// One resource instance in the plan.
#[derive(Debug, Clone)]
struct Instance {
    /// Index into MODULES and the module instance's key; `None` for the root.
    module: Option<(usize, Option<Key>)>,
    resource: usize,
    key: Option<Key>,
    actions: &'static [&'static str],
    /// Moved here by a `moved` block from the same place under `old_<name>`.
    moved: bool,
    /// Deleted outside Terraform (a `resource_drift` delete); the plan creates it again.
    drift_deleted: bool,
    /// The change is to a deposed object (`["delete"]`).
    deposed: bool,
    /// The entry is at the resource's old address, `old_<name>`: one half of a
    /// rename in a plan format without `previous_address` (see [`entries`]).
    at_old_name: bool,
}

impl Instance {
    fn resource_type(&self) -> &'static str {
        RESOURCES[self.resource].0
    }

    fn module_prefix(&self) -> String {
        match self.module {
            None => String::new(),
            Some((m, key)) => format!(
                "module.{}{}.",
                MODULES[m].0,
                key.map(Key::text).unwrap_or_default()
            ),
        }
    }

    fn address_named(&self, name: &str) -> String {
        format!(
            "{}{}.{}{}",
            self.module_prefix(),
            self.resource_type(),
            name,
            self.key.map(Key::text).unwrap_or_default()
        )
    }

    /// The name under which the plan lists this entry.
    fn name(&self) -> String {
        if self.at_old_name {
            self.old_name()
        } else {
            RESOURCES[self.resource].1.to_string()
        }
    }

    /// The name the resource had before it was renamed.
    fn old_name(&self) -> String {
        format!("old_{}", RESOURCES[self.resource].1)
    }

    fn address(&self) -> String {
        self.address_named(&self.name())
    }

    fn previous_address(&self) -> Option<String> {
        self.moved.then(|| self.address_named(&self.old_name()))
    }
}

fn instance() -> impl Strategy<Value = Instance> {
    (
        prop::option::of((0..MODULES.len(), any::<bool>())),
        0..RESOURCES.len(),
        any::<bool>(),
        prop::sample::select(ACTIONS.to_vec()),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(module, resource, pick, actions, moved, drift_deleted, deposed)| {
                let (actions, deposed) = match (drift_deleted, deposed) {
                    (true, _) => (CREATE, false),
                    (false, true) => (DELETE, true),
                    (false, false) => (actions, false),
                };
                Instance {
                    module: module.map(|(m, pick)| (m, MODULES[m].1.key(pick))),
                    resource,
                    key: RESOURCES[resource].2.key(pick),
                    actions,
                    moved,
                    drift_deleted,
                    deposed,
                    at_old_name: false,
                }
            },
        )
}

/// What a rule protects, in the model's own terms.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    Type(&'static str),
    Address {
        /// Module name and key; a `None` key covers every instance of the module.
        module: Option<(&'static str, Option<Key>)>,
        resource_type: &'static str,
        name: String,
        /// `None` covers every instance of the resource.
        key: Option<Key>,
    },
}

impl Target {
    fn text(&self) -> String {
        match self {
            Target::Type(t) => (*t).to_string(),
            Target::Address {
                module,
                resource_type,
                name,
                key,
            } => {
                let prefix = module
                    .map(|(m, k)| format!("module.{m}{}.", k.map(Key::text).unwrap_or_default()))
                    .unwrap_or_default();
                format!(
                    "{prefix}{resource_type}.{name}{}",
                    key.map(Key::text).unwrap_or_default()
                )
            }
        }
    }

    /// The oracle's matcher, written from docs/plan-check.md: a type rule
    /// covers every resource of its type; an address covers the instance it
    /// names, or every instance where it leaves a key out (of the resource or
    /// of its module).
    fn covers(&self, instance: &Instance, name: &str) -> bool {
        match self {
            Target::Type(t) => *t == instance.resource_type(),
            Target::Address {
                module,
                resource_type,
                name: target_name,
                key,
            } => {
                let module_matches = match (module, instance.module) {
                    (None, None) => true,
                    (Some((m, k)), Some((i, ik))) => {
                        *m == MODULES[i].0 && (k.is_none() || *k == ik)
                    }
                    _ => false,
                };
                module_matches
                    && *resource_type == instance.resource_type()
                    && target_name == name
                    && (key.is_none() || *key == instance.key)
            }
        }
    }
}

#[derive(Debug, Clone)]
struct CallerRule {
    target: Target,
    mode: Mode,
}

/// How an `abode_protect` annotation names what it protects.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Form {
    /// `resource_id = T.N.id` (whole resource) or `T.N[k].id` (one instance).
    Direct { one_instance: bool },
    /// `for_each = T.N` and `resource_id = each.value.id`.
    ForEach,
    /// `count = 2` and `resource_id = T.N[count.index].id`.
    Count,
    /// At the root: `resource_id = module.M.out`, whose output refers to `T.N.id`.
    Output { module: usize },
}

#[derive(Debug, Clone)]
struct Annotation {
    /// The module (index into MODULES) it is written in; `None` for the root.
    scope: Option<usize>,
    form: Form,
    resource: usize,
    pick: bool,
    /// `None`: no `mode` argument (the default, confirm).
    mode: Option<Mode>,
}

impl Annotation {
    /// What the annotation protects, per the documented semantics.
    fn target(&self) -> Target {
        let (resource_type, name, repeat) = RESOURCES[self.resource];
        let (module, key) = match self.form {
            Form::Output { module } => (Some(module), None),
            Form::Direct { one_instance: true } => (self.scope, repeat.key(self.pick)),
            _ => (self.scope, None),
        };
        Target::Address {
            // An annotation inside a module protects the resource in every instance of it.
            module: module.map(|m| (MODULES[m].0, None)),
            resource_type,
            name: name.to_string(),
            key,
        }
    }

    fn mode(&self) -> Mode {
        self.mode.unwrap_or(Mode::Confirm)
    }
}

fn annotation() -> impl Strategy<Value = Annotation> {
    (
        prop::option::of(0..MODULES.len()),
        0u8..5,
        0..MODULES.len(),
        0..RESOURCES.len() - 2,
        any::<bool>(),
        prop::option::of(prop::sample::select(vec![Mode::Confirm, Mode::Block])),
    )
        .prop_map(|(scope, form, via, resource, pick, mode)| {
            let form = match form {
                0 => Form::Direct {
                    one_instance: false,
                },
                1 => Form::Direct { one_instance: true },
                2 => Form::ForEach,
                3 => Form::Count,
                _ => Form::Output { module: via },
            };
            // Outputs are followed from the root only in this model.
            let scope = if matches!(form, Form::Output { .. }) {
                None
            } else {
                scope
            };
            Annotation {
                scope,
                form,
                resource,
                pick,
                mode,
            }
        })
}

fn caller_rule(instances: &[Instance], (pick, kind, block): (usize, u8, bool)) -> CallerRule {
    let mode = if block { Mode::Block } else { Mode::Confirm };
    let instance = &instances[pick % instances.len()];
    if kind % 5 == 0 {
        return CallerRule {
            target: Target::Type(instance.resource_type()),
            mode,
        };
    }
    let name = match (kind % 5, instance.moved) {
        // A rule written for the old address keeps protecting the moved resource.
        (4, true) => instance.old_name(),
        _ => RESOURCES[instance.resource].1.to_string(),
    };
    let whole_module = kind % 5 == 3;
    CallerRule {
        target: Target::Address {
            module: instance
                .module
                .map(|(m, k)| (MODULES[m].0, if whole_module { None } else { k })),
            resource_type: instance.resource_type(),
            name,
            key: if kind % 5 == 1 { instance.key } else { None },
        },
        mode,
    }
}

// ---------------------------------------------------------------------------
// Plan JSON from the model, in the shapes real Terraform plans have (see the
// annotation-* and drift-* fixtures).
// ---------------------------------------------------------------------------

fn resource_change(instance: &Instance, values: Option<ChangeValues>) -> Value {
    let mut change = json!({
        "address": instance.address(),
        "mode": "managed",
        "type": instance.resource_type(),
        "name": instance.name(),
        "change": {"actions": instance.actions, "before": {"id": "i-1", "name": "old"},
                   "after": {"name": "new"}, "after_unknown": {"id": true},
                   "before_sensitive": {}, "after_sensitive": {}, "replace_paths": [["name"]]},
    });
    if let Some(values) = values {
        change["change"] = values.change;
    }
    if let Some((m, key)) = instance.module {
        change["module_address"] = json!(format!(
            "module.{}{}",
            MODULES[m].0,
            key.map(Key::text).unwrap_or_default()
        ));
    }
    if let Some(key) = instance.key {
        change["index"] = match key {
            Key::Index(i) => json!(i),
            Key::Name(n) => json!(n),
        };
    }
    if let Some(previous) = instance.previous_address() {
        change["previous_address"] = json!(previous);
    }
    if instance.deposed {
        change["deposed"] = json!("0000abcd");
    } else if instance.actions == DELETE {
        change["action_reason"] = json!("delete_because_no_resource_config");
    } else if instance.actions.contains(&"delete") {
        change["action_reason"] = json!("replace_because_cannot_update");
    }
    change
}

fn drift_entry(instance: &Instance) -> Value {
    json!({
        "address": instance.address(), "mode": "managed", "type": instance.resource_type(),
        "name": instance.name(),
        "change": {"actions": ["delete"], "before": {"id": "i-1", "name": "old"}, "after": null,
                   "before_sensitive": {}, "after_sensitive": false}
    })
}

fn annotation_config(i: usize, a: &Annotation) -> Value {
    let (t, n, repeat) = RESOURCES[a.resource];
    let mut resource = json!({
        "address": format!("abode_protect.p{i}"),
        "mode": "managed",
        "type": "abode_protect",
        "name": format!("p{i}"),
        "provider_config_key": "abode",
        "schema_version": 0,
    });
    let references: Vec<String> = match a.form {
        Form::Direct { one_instance } => match repeat.key(a.pick) {
            Some(key) if one_instance => vec![
                format!("{t}.{n}{}.id", key.text()),
                format!("{t}.{n}{}", key.text()),
                format!("{t}.{n}"),
            ],
            _ => vec![format!("{t}.{n}.id"), format!("{t}.{n}")],
        },
        Form::ForEach => {
            resource["for_each_expression"] = json!({"references": [format!("{t}.{n}")]});
            vec!["each.value.id".into(), "each.value".into()]
        }
        Form::Count => {
            resource["count_expression"] = json!({"constant_value": 2});
            vec![format!("{t}.{n}"), "count.index".into()]
        }
        Form::Output { module } => {
            let call = MODULES[module].0;
            vec![
                format!("module.{call}.out_{t}_{n}"),
                format!("module.{call}"),
            ]
        }
    };
    let mut expressions = json!({"resource_id": {"references": references}});
    if let Some(mode) = a.mode {
        expressions["mode"] = json!({"constant_value": mode.as_str()});
    }
    resource["expressions"] = expressions;
    resource
}

fn configuration(annotations: &[Annotation]) -> Value {
    let mut root = Vec::new();
    let mut modules: Vec<Vec<Value>> = vec![Vec::new(); MODULES.len()];
    for (i, a) in annotations.iter().enumerate() {
        let resource = annotation_config(i, a);
        match a.scope {
            None => root.push(resource),
            Some(m) => modules[m].push(resource),
        }
    }
    let calls: Map<String, Value> = MODULES
        .iter()
        .zip(modules)
        .map(|((name, _), resources)| {
            let outputs: Map<String, Value> = RESOURCES
                .iter()
                .map(|(t, n, _)| {
                    (
                        format!("out_{t}_{n}"),
                        json!({"expression": {"references": [format!("{t}.{n}.id"), format!("{t}.{n}")]}}),
                    )
                })
                .collect();
            (
                (*name).to_string(),
                json!({"source": format!("./modules/{name}"),
                       "module": {"resources": resources, "outputs": outputs}}),
            )
        })
        .collect();
    json!({"root_module": {"resources": root, "module_calls": calls}})
}

#[derive(Debug, Clone)]
struct Model {
    instances: Vec<Instance>,
    annotations: Vec<Annotation>,
    caller: Vec<CallerRule>,
}

fn model() -> impl Strategy<Value = Model> {
    (
        prop::collection::vec(instance(), 1..10),
        prop::collection::vec(annotation(), 0..4),
        prop::collection::vec((0usize..10, 0u8..5, any::<bool>()), 0..4),
    )
        .prop_map(|(instances, annotations, picks)| {
            // One change per address, as in a real plan.
            let mut seen = std::collections::BTreeSet::new();
            let instances: Vec<Instance> = instances
                .into_iter()
                .filter(|i| seen.insert(i.address()))
                .collect();
            let caller = picks
                .into_iter()
                .map(|p| caller_rule(&instances, p))
                .collect();
            Model {
                instances,
                annotations,
                caller,
            }
        })
}

// ---------------------------------------------------------------------------
// Plan formats. Terraform 0.12 to 1.0 wrote formats 0.1 and 0.2, which lack
// fields that the model above relies on (docs/plan-check.md, "Plan formats",
// and the tf0.13-* and tf1.0-* fixtures). A plan is generated as 1.x would
// write it, from the entries the older format would have, and then loses
// the fields its format does not write.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// "0.1": Terraform 0.12/0.13 wrote no sensitivity marks, 0.14/0.15 did.
    V0_1 {
        marks: bool,
    },
    /// "0.2": Terraform 1.0.
    V0_2,
    V1,
}

impl Format {
    fn version(self) -> &'static str {
        match self {
            Format::V0_1 { .. } => "0.1",
            Format::V0_2 => "0.2",
            Format::V1 => "1.2",
        }
    }

    fn terraform_version(self) -> &'static str {
        match self {
            Format::V0_1 { marks: false } => "0.13.5",
            Format::V0_1 { marks: true } => "0.15.5",
            Format::V0_2 => "1.0.3",
            Format::V1 => "1.11.4",
        }
    }

    /// `moved` blocks and `previous_address` came with Terraform 1.1.
    fn has_previous_address(self) -> bool {
        self == Format::V1
    }

    fn has_drift(self) -> bool {
        !matches!(self, Format::V0_1 { .. })
    }

    /// The `missing` fields the JSON report must name (docs/plan-check.md, in
    /// the order of its table).
    fn missing(self) -> &'static [&'static str] {
        match self {
            Format::V0_1 { .. } => &[
                "action_reason",
                "replace_paths",
                "resource_drift",
                "previous_address",
            ],
            Format::V0_2 => &["action_reason", "previous_address"],
            Format::V1 => &[],
        }
    }
}

fn format() -> impl Strategy<Value = Format> {
    // Half the plans are 1.x, the only format with `previous_address`, so
    // moved resources keep their share of cases.
    prop_oneof![
        2 => Just(Format::V1),
        1 => Just(Format::V0_2),
        1 => any::<bool>().prop_map(|marks| Format::V0_1 { marks }),
    ]
}

/// A plan's entries: its `resource_changes` and the resources its
/// `resource_drift` shows deleted.
struct Entries {
    changes: Vec<Instance>,
    deleted_outside: Vec<Instance>,
}

/// The entries a plan of `format` has for `model`.
///
/// Without `previous_address` there were no `moved` blocks: renaming a
/// resource deletes the object at the old address and creates one at the new
/// address (the tf*-rename fixtures), whatever a 1.x plan would do to the
/// moved object. A moved resource that the 1.x plan deletes or forgets is
/// deleted or forgotten at its old address only. A moved resource deleted
/// outside Terraform has nothing left to delete: the drift names its old
/// address, and the new address is a plain create. Without `resource_drift`
/// no deletion outside Terraform is known at all.
fn entries(model: &Model, format: Format) -> Entries {
    let mut changes = Vec::new();
    let mut deleted_outside = Vec::new();
    for instance in &model.instances {
        let mut entry = instance.clone();
        if instance.moved && !format.has_previous_address() {
            entry.moved = false;
            let old = Instance {
                at_old_name: true,
                drift_deleted: false,
                ..entry.clone()
            };
            let gone = matches!(instance.actions, ["delete"] | ["forget"]);
            if instance.drift_deleted {
                if format.has_drift() {
                    deleted_outside.push(old);
                }
                entry.drift_deleted = false;
            } else if gone {
                changes.push(old);
                continue;
            } else {
                changes.push(Instance {
                    actions: DELETE,
                    deposed: false,
                    ..old
                });
                entry.actions = CREATE;
                entry.deposed = false;
            }
        }
        entry.drift_deleted &= format.has_drift();
        if entry.drift_deleted {
            deleted_outside.push(entry.clone());
        }
        changes.push(entry);
    }
    Entries {
        changes,
        deleted_outside,
    }
}

/// The plan `format` writes for `model`.
fn plan_json(model: &Model, format: Format) -> Value {
    let mut plan = plan_json_with_all_fields(model, format);
    write_as(format, &mut plan, false);
    plan
}

/// The plan for `model` with the entries of `format` but every field of 1.x.
fn plan_json_with_all_fields(model: &Model, format: Format) -> Value {
    let entries = entries(model, format);
    let changes: Vec<Value> = entries
        .changes
        .iter()
        .map(|i| resource_change(i, None))
        .collect();
    let drift: Vec<Value> = entries.deleted_outside.iter().map(drift_entry).collect();
    json!({
        "format_version": format.version(),
        "terraform_version": format.terraform_version(),
        "planned_values": {"root_module": {}},
        "resource_drift": drift,
        "resource_changes": changes,
        "configuration": configuration(&model.annotations),
    })
}

/// Removes from a plan what `format` does not write. With `values_kept`, a
/// format 0.1 plan keeps `replace_paths` and `resource_drift`, which Terraform
/// never wrote in it: the guard renders whatever values a change carries
/// without asking its format, so only such a plan checks that values without
/// sensitivity marks stay hidden.
fn write_as(format: Format, plan: &mut Value, values_kept: bool) {
    let old_0_1 = matches!(format, Format::V0_1 { .. });
    let unmarked = format == Format::V0_1 { marks: false };
    let plan = plan.as_object_mut().unwrap();
    if old_0_1 && !values_kept {
        plan.remove("resource_drift");
    }
    if let Some(drift) = plan.get_mut("resource_drift").and_then(Value::as_array_mut) {
        if unmarked {
            for entry in drift {
                unmark(&mut entry["change"]);
            }
        }
    }
    for entry in plan["resource_changes"].as_array_mut().unwrap() {
        let replacement = {
            let actions = &entry["change"]["actions"];
            actions.as_array().unwrap().contains(&json!("delete"))
                && actions.as_array().unwrap().contains(&json!("create"))
        };
        let entry = entry.as_object_mut().unwrap();
        // `entries` made renames a delete and a create already.
        assert!(
            format.has_previous_address() || !entry.contains_key("previous_address"),
            "{entry:?}"
        );
        match format {
            Format::V1 => {}
            // Terraform 1.0 explains replacements only.
            Format::V0_2 if replacement => {}
            _ => {
                entry.remove("action_reason");
            }
        }
        let change = entry.get_mut("change").unwrap();
        if old_0_1 && !values_kept {
            change.as_object_mut().unwrap().remove("replace_paths");
        }
        if unmarked {
            unmark(change);
        }
    }
}

fn unmark(change: &mut Value) {
    let change = change.as_object_mut().unwrap();
    change.remove("before_sensitive");
    change.remove("after_sensitive");
}

fn guard_rules(model: &Model) -> Vec<Rule> {
    model
        .caller
        .iter()
        .map(|rule| match &rule.target {
            Target::Type(t) => Rule::resource_type(t, rule.mode, Origin::Caller),
            target => Rule::address(
                Address::parse(&target.text()).unwrap(),
                rule.mode,
                Origin::Caller,
            ),
        })
        .collect()
}

/// Every entry the plan destroys, or creates again after drift deleted it, with
/// whether it is re-created and the strictest mode of the rules covering it.
fn destroyed(model: &Model, format: Format) -> Vec<(String, bool, Option<Mode>)> {
    let mut rules: Vec<(Target, Mode)> = model
        .caller
        .iter()
        .map(|r| (r.target.clone(), r.mode))
        .collect();
    rules.extend(model.annotations.iter().map(|a| (a.target(), a.mode())));
    let mut out = Vec::new();
    for instance in &entries(model, format).changes {
        if matches!(instance.resource_type(), "abode_protect" | "abode_metadata") {
            continue;
        }
        let destroys = instance.actions.contains(&"delete");
        let recreated = instance.actions == ["create"] && instance.drift_deleted;
        if !destroys && !recreated {
            continue;
        }
        // Only a plan that records the move (`previous_address`) lets a rule
        // on the old address follow the resource; otherwise the old address
        // is an entry of its own.
        let strictest = rules
            .iter()
            .filter(|(target, _)| {
                target.covers(instance, &instance.name())
                    || (instance.moved && target.covers(instance, &instance.old_name()))
            })
            .map(|(_, mode)| *mode)
            .max();
        out.push((instance.address(), recreated, strictest));
    }
    out
}

/// The documented decision for each instance that the report must list, with
/// its outcome (docs/plan-check.md, "Decision"), in a plan of `format` built at
/// `initiator`'s request. A claim lists none: everything it destroys is allowed
/// (see [`expected_claim`]).
fn expected(
    model: &Model,
    format: Format,
    transition: BuildIntent,
    initiator: Initiator,
) -> BTreeMap<String, Decision> {
    let mut out = BTreeMap::new();
    if transition == BuildIntent::Claim {
        return out;
    }
    // Only a person's delete means to destroy protected data; a delete the
    // system started is held or blocked by the same rules as a start.
    let intended_delete = transition == BuildIntent::Delete && initiator == Initiator::Person;
    for (address, recreated, strictest) in destroyed(model, format) {
        let Some(strictest) = strictest else {
            continue;
        };
        let outcome = match (intended_delete, recreated, strictest) {
            (true, _, _) => Decision::Allow,
            (false, true, _) => Decision::Confirm,
            (false, false, Mode::Confirm) => Decision::Confirm,
            (false, false, Mode::Block) => Decision::Block,
        };
        out.insert(address, outcome);
    }
    out
}

/// What a claim build lists in `claim_replacements`: every destroyed or
/// re-created entry, protected or not, sorted.
fn expected_claim(model: &Model, format: Format) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = destroyed(model, format)
        .into_iter()
        .map(|(address, _, strictest)| (address, strictest.is_some()))
        .collect();
    out.sort();
    out
}

// ---------------------------------------------------------------------------
// Secrets.
// ---------------------------------------------------------------------------

/// Where the secret sits in the copied attribute.
#[derive(Debug, Clone, Copy)]
enum Place {
    Whole,
    Inside,
    MapKey,
    ListElement,
}

/// How the plan knows it is a secret.
#[derive(Debug, Clone, Copy)]
enum Marks {
    Before,
    After,
    Both,
    /// Marked nowhere; it is the value of a sensitive root variable.
    RootVariable,
}

fn secret_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => any::<char>(),
        2 => prop::sample::select(vec!['"', '\\', '\n', '\t', '\r', '\0', '\u{1}', '\u{1b}', '\u{7f}', 'é', '€', '😀', '\u{2028}', ' ', '=', '{', '[', ',']),
        3 => prop::char::range('a', 'z'),
    ]
}

fn secret() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => prop::collection::vec(secret_char(), 1..6),
        2 => prop::collection::vec(secret_char(), 6..40),
        1 => prop::collection::vec(secret_char(), 150..=500),
    ]
    .prop_map(|chars| chars.into_iter().collect())
}

struct ChangeValues {
    change: Value,
}

/// The secret's change: `password` holds it (marked as `marks` says), `copy`
/// holds it unmarked in the shape `place` says, and both force replacement.
fn secret_values(secret: &str, place: Place, marks: Marks) -> ChangeValues {
    let copy = match place {
        Place::Whole => json!(secret),
        Place::Inside => json!(format!("pg://app:{secret}@db-1:5432")),
        Place::MapKey => json!({secret: "disk-1", "team": "dev"}),
        Place::ListElement => json!(["disk-1", secret, "x"]),
    };
    let marked = json!({"password": true});
    let (before_sensitive, after_sensitive) = match marks {
        Marks::Before => (marked, json!({})),
        Marks::After => (json!({}), marked),
        Marks::Both => (marked.clone(), marked),
        Marks::RootVariable => (json!({}), json!({})),
    };
    let mut replace_paths = vec![json!(["password"]), json!(["copy"]), json!(["name"])];
    match place {
        Place::MapKey => replace_paths.push(json!(["copy", secret])),
        Place::ListElement => replace_paths.push(json!(["copy", 1])),
        _ => {}
    }
    ChangeValues {
        change: json!({
            "actions": ["delete", "create"],
            "before": {"id": "i-1", "name": "old", "password": secret, "copy": copy},
            "after": {"name": "new", "password": secret, "copy": copy},
            "after_unknown": {"id": true},
            "before_sensitive": before_sensitive,
            "after_sensitive": after_sensitive,
            "replace_paths": replace_paths,
        }),
    }
}

/// How a secret plan is written: its format, and for format 0.1 whether it
/// keeps the fields that carry values (see [`write_as`]).
#[derive(Debug, Clone, Copy)]
struct Writing {
    format: Format,
    values_kept: bool,
}

/// A plan where instance 0 of `model` (made a protected replace) carries the
/// secret, with a drift entry showing the copy changed outside Terraform. The
/// top-level fields are in Terraform's order (`variables` before the changes,
/// `configuration` after them).
fn secret_plan(
    model: &Model,
    secret: &str,
    place: Place,
    marks: Marks,
    writing: Writing,
) -> Vec<(&'static str, Value)> {
    let mut plan = plan_json_with_all_fields(model, writing.format);
    let carrier = &model.instances[0];
    let values = secret_values(secret, place, marks);
    // What the last build recorded, and the object as refreshed (the
    // change's `before`), with the same marks, as Terraform writes drift.
    let mut recorded = values.change["before"].clone();
    recorded["copy"] = json!("disk-0");
    let drift_change = json!({
        "actions": ["update"],
        "before": recorded,
        "after": values.change["before"].clone(),
        "before_sensitive": values.change["before_sensitive"].clone(),
        "after_sensitive": values.change["after_sensitive"].clone(),
    });
    // The carrier is never moved, so it is the first entry in every format.
    assert_eq!(
        plan["resource_changes"][0]["address"],
        json!(carrier.address())
    );
    plan["resource_changes"][0] = resource_change(carrier, Some(values));
    let mut drift = plan["resource_drift"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    drift.retain(|d| d["address"] != json!(carrier.address()));
    drift.push(json!({"address": carrier.address(), "mode": "managed",
                      "type": carrier.resource_type(), "name": carrier.name(),
                      "change": drift_change}));
    plan["resource_drift"] = json!(drift);
    let token = match marks {
        Marks::RootVariable => secret.to_string(),
        _ => "open-value".to_string(),
    };
    plan["variables"] = json!({"token": {"value": token}, "region": {"value": "eu-west-1"}});
    plan["configuration"]["root_module"]["variables"] =
        json!({"token": {"sensitive": true}, "region": {}});
    write_as(writing.format, &mut plan, writing.values_kept);
    [
        "format_version",
        "terraform_version",
        "variables",
        "planned_values",
        "resource_drift",
        "resource_changes",
        "configuration",
    ]
    .into_iter()
    .filter_map(|key| Some((key, plan.get_mut(key)?.take())))
    .collect()
}

/// Every output the guard gives for a plan: text, coloured text, JSON.
fn outputs(
    plan: &[(&str, Value)],
    transition: BuildIntent,
    initiator: Initiator,
    rules: &[Rule],
) -> Vec<String> {
    // serde_json's map sorts its keys; the top level is written by hand to
    // keep Terraform's order.
    let body: Vec<String> = plan
        .iter()
        .map(|(k, v)| format!("{}:{}", json!(k), v))
        .collect();
    let bytes = format!("{{{}}}", body.join(","));
    let plan = abode_guard::read_plan_slice(bytes.as_bytes()).unwrap();
    let report = abode_guard::evaluate_as(&plan, transition, initiator, rules);
    vec![
        abode_guard::render_text(&report, false),
        abode_guard::render_text(&report, true),
        report.to_json(),
    ]
}

/// `text` as it appears inside a JSON string, without the quotes.
fn escaped(text: &str) -> String {
    let quoted = Value::String(text.to_string()).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// The forms in which a piece of a secret could be printed: raw (map keys
/// that read like identifiers, JSON report fields), escaped once (a rendered
/// value), escaped twice (a rendered value inside the JSON report).
fn printed_forms(piece: &str) -> [String; 3] {
    let once = escaped(piece);
    let twice = escaped(&once);
    [piece.to_string(), once, twice]
}

/// What counts as a leak, and why it is sound.
///
/// A secret of 6 or more characters leaks if any 6-character piece of it, in
/// any printed form, appears in an output. Secrets are arbitrary, so such a
/// piece can also be ordinary report text (six spaces, `delete`, a resource
/// name). Such a piece is only a leak if it is absent from the outputs of the
/// *twin* plan, the same plan with every occurrence of the secret replaced by
/// a filler of the same length made of one character the secret does not
/// contain: whatever the twin prints cannot come from the secret. The twin
/// is hidden or shown exactly where the secret is, so the two reports have the
/// same shape. (A false alarm would need the secret to contain, by chance,
/// text the report prints only because the secret differs from the filler,
/// such as a key order; hidden keys are listed last to avoid even that.)
///
/// A shorter secret has no 6-character pieces, and the guard shows secrets of
/// fewer than 4 characters when they sit inside a longer string (hiding every
/// string containing an `a` would hide everything). What must hold for every
/// secret is that it is never printed as a whole value: `"secret"`, in any
/// printed form, does not appear (again unless the twin prints it too).
fn leaks(secret: &str, outputs: &[String], twin: &[String]) -> Option<String> {
    let chars: Vec<char> = secret.chars().collect();
    let mut pieces: Vec<String> = Vec::new();
    for window in chars.windows(6) {
        pieces.extend(printed_forms(&window.iter().collect::<String>()));
    }
    let quoted = Value::String(secret.to_string()).to_string();
    pieces.push(quoted.clone());
    pieces.push(escaped(&quoted));
    pieces.into_iter().find(|piece| {
        outputs.iter().any(|o| o.contains(piece.as_str()))
            && !twin.iter().any(|o| o.contains(piece.as_str()))
    })
}

fn filler_for(secret: &str) -> String {
    let c = ['\u{2603}', 'Q', '\u{e000}']
        .into_iter()
        .find(|c| !secret.contains(*c))
        .unwrap();
    std::iter::repeat_n(c, secret.chars().count()).collect()
}

/// The report names what an older format cannot explain, and only for an
/// older format (docs/plan-check.md, `older_plan_format` and "Older plan:").
fn check_older_plan_format(
    format: Format,
    json_report: &str,
    text: &str,
) -> Result<(), TestCaseError> {
    let report: Value = serde_json::from_str(json_report).unwrap();
    let older = report.get("older_plan_format");
    if format == Format::V1 {
        prop_assert!(
            older.is_none(),
            "a 1.x plan reported as older:\n{}",
            json_report
        );
        prop_assert!(!text.contains("Older plan:"), "{}", text);
        return Ok(());
    }
    let Some(older) = older else {
        return Err(TestCaseError::fail(format!(
            "no older_plan_format:\n{json_report}"
        )));
    };
    prop_assert_eq!(&older["format_version"], &json!(format.version()));
    let fields: Vec<&str> = older["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["field"].as_str().unwrap())
        .collect();
    prop_assert_eq!(fields.as_slice(), format.missing());
    let heading = format!("Older plan: format_version {} (", format.version());
    prop_assert!(text.contains(&heading), "{}", text);
    Ok(())
}

proptest! {
    // Cheap cases (about 3 ms each), and renames in older formats are
    // protected in few of them: many, so each run sees some.
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn every_transition_gets_the_documented_decision(model in model(), format in format()) {
        let bytes = serde_json::to_vec(&plan_json(&model, format)).unwrap();
        let plan = abode_guard::read_plan_slice(&bytes).unwrap();
        let rules = guard_rules(&model);
        let builds = [BuildIntent::Start, BuildIntent::Stop, BuildIntent::Delete, BuildIntent::Claim]
            .into_iter()
            .flat_map(|t| [(t, Initiator::Person), (t, Initiator::System)]);
        for (transition, initiator) in builds {
            let report = if initiator == Initiator::Person {
                abode_guard::evaluate(&plan, transition, &rules)
            } else {
                abode_guard::evaluate_as(&plan, transition, initiator, &rules)
            };
            let json_report = report.to_json();
            check_older_plan_format(format, &json_report, &abode_guard::render_text(&report, false))?;
            // Who asked is in the JSON only when it was the system (docs/plan-check.md).
            let said: Value = serde_json::from_str(&json_report).unwrap();
            let want_said = match initiator {
                Initiator::Person => None,
                Initiator::System => Some(&json!("system")),
            };
            prop_assert_eq!(said.get("initiator"), want_said);
            let mut claimed: Vec<(String, bool)> = report
                .claim_replacements
                .iter()
                .map(|c| (c.address.clone(), c.protected))
                .collect();
            claimed.sort();
            let want_claimed = if transition == BuildIntent::Claim {
                expected_claim(&model, format)
            } else {
                Vec::new()
            };
            prop_assert_eq!(&claimed, &want_claimed, "{} build by the {}", transition, initiator);
            if transition == BuildIntent::Claim {
                prop_assert!(report.unprotected_destroys.is_empty());
            }
            let want = expected(&model, format, transition, initiator);
            let got: BTreeMap<String, Decision> = report
                .protected_changes
                .iter()
                .map(|c| (c.address.clone(), c.outcome))
                .collect();
            prop_assert_eq!(&got, &want, "{} build by the {}", transition, initiator);
            let overall = want.values().copied().max().unwrap_or(Decision::Allow);
            prop_assert_eq!(report.decision, overall, "{} build by the {}", transition, initiator);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn no_secret_reaches_any_output(
        model in model(),
        secret in secret(),
        place in prop::sample::select(vec![Place::Whole, Place::Inside, Place::MapKey, Place::ListElement]),
        marks in prop::sample::select(vec![Marks::Before, Marks::After, Marks::Both, Marks::RootVariable]),
        transition in prop::sample::select(vec![BuildIntent::Start, BuildIntent::Stop, BuildIntent::Delete, BuildIntent::Claim]),
        initiator in prop::sample::select(vec![Initiator::Person, Initiator::System]),
        format in format(),
        values_kept in any::<bool>(),
    ) {
        let mut model = model;
        let writing = Writing { format, values_kept: values_kept && matches!(format, Format::V0_1 { .. }) };
        // The carrier is a protected replace at the root, so its values are shown.
        let carrier = Instance {
            module: None, resource: 0, key: None, actions: &["delete", "create"],
            moved: false, drift_deleted: false, deposed: false, at_old_name: false,
        };
        model.instances.retain(|i| i.address() != carrier.address());
        model.instances.insert(0, carrier);
        let mut rules = guard_rules(&model);
        rules.push(Rule::resource_type("terraform_data", Mode::Confirm, Origin::Caller));
        let shown = outputs(&secret_plan(&model, &secret, place, marks, writing), transition, initiator, &rules);
        let filler = filler_for(&secret);
        let twin = outputs(&secret_plan(&model, &filler, place, marks, writing), transition, initiator, &rules);
        prop_assert!(shown[0].contains("terraform_data.disk"), "the carrier is not reported:\n{}", shown[0]);
        check_older_plan_format(format, &shown[2], &shown[0])?;
        if let Some(piece) = leaks(&secret, &shown, &twin) {
            prop_assert!(false, "{:?} of the secret reached the output:\n{}\n{}", piece, shown[0], shown[2]);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_reader_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = abode_guard::read_plan_slice(&bytes);
        let _ = abode_guard::read_plan(bytes.as_slice());
    }

    #[test]
    fn the_reader_never_panics_on_mangled_plans(
        model in model(),
        format in format(),
        cut in 0usize..4000,
        flip in 0usize..4000,
    ) {
        let mut bytes = serde_json::to_vec(&plan_json(&model, format)).unwrap();
        if let Some(b) = bytes.get_mut(flip) { *b = b'"'; }
        bytes.truncate(cut);
        if let Ok(plan) = abode_guard::read_plan_slice(&bytes) {
            let report = abode_guard::evaluate(&plan, BuildIntent::Start, &[]);
            abode_guard::render_text(&report, false);
        }
    }
}

// ---------------------------------------------------------------------------
// Retain on delete: a delete that retains resources (`on_delete = "retain"`)
// is planned by Abode as a normal plan over a configuration without the
// template's resources plus `removed { from = R; lifecycle { destroy = false } }`
// for each retained resource R. Terraform forgets every object of R (its
// deposed objects too) and deletes everything else. A hostile or broken plan
// may destroy an object of R instead.
//
// What the guard must say, written from the model:
// - an object of a retained resource that the plan forgets (current or
//   deposed) is listed once in `retained` and nowhere else;
// - one that the plan destroys (deleted, replaced either way, or a deposed
//   object deleted: each ends an object of R that the delete promised to
//   keep) is a protected change blocked whoever asked, and the delete is
//   blocked, until a plan that forgets it comes;
// - everything else is judged exactly as a delete without retain judges it.
// Retaining is by resource: instance keys, of the resource and of its
// modules, are left out of the retain list (`removed` cannot name them).
// Annotation types hold nothing and are never retained in the model.
// ---------------------------------------------------------------------------

const FORGET: &[&str] = &["forget"];

/// The resource an instance belongs to, as `removed` names it: module name,
/// type and name, without keys.
fn resource_of(instance: &Instance) -> (Option<&'static str>, &'static str, &'static str) {
    (
        instance.module.map(|(m, _)| MODULES[m].0),
        instance.resource_type(),
        RESOURCES[instance.resource].1,
    )
}

fn is_annotation(instance: &Instance) -> bool {
    matches!(instance.resource_type(), "abode_protect" | "abode_metadata")
}

/// A delete's plan: what it retains, the list Abode hands the guard, and the
/// entries of the plan (current and deposed objects).
#[derive(Debug, Clone)]
struct DeleteCase {
    model: Model,
    retained: Vec<(Option<&'static str>, &'static str, &'static str)>,
    retain_list: Vec<String>,
    changes: Vec<Instance>,
    /// Whether the plan may destroy retained objects at all (otherwise it
    /// forgets every one, as Terraform's would).
    hostile: bool,
}

/// Per instance: whether its resource is retained, what a hostile plan does to
/// it (0 forgets, 1 deletes, 2 and 3 replace), whether it has a deposed
/// object, and whether the retain list names it with its keys.
type InstancePick = (bool, u8, bool, bool);

fn delete_case() -> impl Strategy<Value = DeleteCase> {
    (
        model(),
        prop::collection::vec(
            (
                prop::bool::weighted(0.5),
                0u8..4,
                prop::bool::weighted(0.2),
                any::<bool>(),
            ),
            10,
        ),
        prop::bool::weighted(0.4),
    )
        .prop_map(|(model, picks, hostile)| delete_case_from(model, &picks, hostile))
}

fn delete_case_from(model: Model, picks: &[InstancePick], hostile: bool) -> DeleteCase {
    let mut model = model;
    for instance in &mut model.instances {
        // A delete plan has no `moved` blocks and refreshes nothing back to life.
        instance.moved = false;
        instance.drift_deleted = false;
        instance.deposed = false;
        instance.at_old_name = false;
    }
    let mut retained = Vec::new();
    let mut retain_list = Vec::new();
    for (instance, &(pick, _, _, with_keys)) in model.instances.iter().zip(picks) {
        let resource = resource_of(instance);
        if pick && !is_annotation(instance) && !retained.contains(&resource) {
            retained.push(resource);
            retain_list.push(if with_keys {
                instance.address()
            } else {
                let (module, t, n) = resource;
                let prefix = module.map(|m| format!("module.{m}.")).unwrap_or_default();
                format!("{prefix}{t}.{n}")
            });
        }
    }
    let mut changes = Vec::new();
    for (instance, &(_, fate, deposed, _)) in model.instances.iter().zip(picks) {
        let kept = retained.contains(&resource_of(instance));
        let actions = match (kept, hostile, fate) {
            (false, _, _) => DELETE,
            (true, false, _) | (true, true, 0) => FORGET,
            (true, true, 1) => DELETE,
            (true, true, 2) => &["delete", "create"],
            (true, true, _) => &["create", "delete"],
        };
        changes.push(Instance {
            actions,
            ..instance.clone()
        });
        if deposed {
            let actions = if kept && !(hostile && fate == 1) {
                FORGET
            } else {
                DELETE
            };
            changes.push(Instance {
                actions,
                deposed: true,
                ..instance.clone()
            });
        }
    }
    DeleteCase {
        model,
        retained,
        retain_list,
        changes,
        hostile,
    }
}

impl DeleteCase {
    fn kept(&self, instance: &Instance) -> bool {
        self.retained.contains(&resource_of(instance))
    }

    /// The plan of the delete, as Terraform 1.x writes it: without the
    /// entries `leave_out` says.
    fn plan(&self, leave_out: impl Fn(&Instance) -> bool) -> abode_guard::Plan {
        let changes: Vec<Value> = self
            .changes
            .iter()
            .filter(|i| !leave_out(i))
            .map(|i| {
                let mut change = resource_change(i, None);
                if i.actions == FORGET && !i.deposed {
                    change["action_reason"] = json!("delete_because_no_resource_config");
                }
                change
            })
            .collect();
        let plan = json!({
            "format_version": Format::V1.version(),
            "terraform_version": Format::V1.terraform_version(),
            "planned_values": {"root_module": {}},
            "resource_changes": changes,
            "configuration": configuration(&self.model.annotations),
        });
        abode_guard::read_plan_slice(&serde_json::to_vec(&plan).unwrap()).unwrap()
    }

    fn retain(&self) -> Vec<Address> {
        self.retain_list
            .iter()
            .map(|a| Address::parse(a).unwrap())
            .collect()
    }
}

/// The model's rules with what each protects, as [`destroyed`] reads them.
fn model_rules(model: &Model) -> Vec<(Target, Mode)> {
    let mut rules: Vec<(Target, Mode)> = model
        .caller
        .iter()
        .map(|r| (r.target.clone(), r.mode))
        .collect();
    rules.extend(model.annotations.iter().map(|a| (a.target(), a.mode())));
    rules
}

/// What the report of a retaining delete must hold, from the model.
#[derive(Debug, Default, PartialEq)]
struct DeleteExpectation {
    /// (address, deposed) of every protected change, with its outcome.
    protected: Vec<((String, bool), Decision)>,
    /// Addresses of the unprotected destroys.
    unprotected: Vec<String>,
    /// (address, deposed) of every retained object.
    retained: Vec<(String, bool)>,
}

fn expected_delete(case: &DeleteCase, initiator: Initiator) -> DeleteExpectation {
    let rules = model_rules(&case.model);
    let mut out = DeleteExpectation::default();
    for instance in &case.changes {
        if is_annotation(instance) {
            continue;
        }
        let entry = (instance.address(), instance.deposed);
        if case.kept(instance) {
            if instance.actions == FORGET {
                out.retained.push(entry);
            } else {
                out.protected.push((entry, Decision::Block));
            }
            continue;
        }
        let strictest = rules
            .iter()
            .filter(|(target, _)| target.covers(instance, &instance.name()))
            .map(|(_, mode)| *mode)
            .max();
        match (strictest, initiator) {
            (None, _) => out.unprotected.push(entry.0),
            // A person's delete means to destroy the workspace's data.
            (Some(_), Initiator::Person) => out.protected.push((entry, Decision::Allow)),
            // A delete nobody asked for is held or blocked as a start is.
            (Some(mode), Initiator::System) => out.protected.push((entry, Decision::from(mode))),
        }
    }
    out.protected.sort();
    out.unprotected.sort();
    out.retained.sort();
    out
}

fn got_delete(report: &abode_guard::Report) -> DeleteExpectation {
    let mut got = DeleteExpectation {
        protected: report
            .protected_changes
            .iter()
            .map(|c| ((c.address.clone(), c.deposed.is_some()), c.outcome))
            .collect(),
        unprotected: report
            .unprotected_destroys
            .iter()
            .map(|c| c.address.clone())
            .collect(),
        retained: report
            .retained
            .iter()
            .map(|r| (r.address.clone(), r.deposed.is_some()))
            .collect(),
    };
    got.protected.sort();
    got.unprotected.sort();
    got.retained.sort();
    got
}

// ---------------------------------------------------------------------------
// `on_delete`, `retain_for` and `expire` on generated annotations: they decide
// nothing outside a delete's retain list, and reach memory as documented.
// ---------------------------------------------------------------------------

/// One argument as a template writes it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Arg {
    Absent,
    Literal(&'static str),
    /// An expression of references only (`var.keep`): not a literal.
    Reference,
}

#[derive(Debug, Clone, Copy)]
struct RetainArgs {
    on_delete: Arg,
    retain_for: Arg,
    expire: Arg,
}

fn arg(literals: &'static [&'static str]) -> impl Strategy<Value = Arg> {
    prop_oneof![
        1 => Just(Arg::Absent),
        3 => prop::sample::select(literals).prop_map(Arg::Literal),
        1 => Just(Arg::Reference),
    ]
}

fn retain_args() -> impl Strategy<Value = RetainArgs> {
    (
        arg(&["retain", "destroy", "keep"]),
        arg(&["30d", "12h", "90m", "soon", "0d"]),
        arg(&["hold", "destroy", "later"]),
    )
        .prop_map(|(on_delete, retain_for, expire)| RetainArgs {
            on_delete,
            retain_for,
            expire,
        })
}

impl RetainArgs {
    /// The annotation's delete rule, per the documentation: a literal
    /// "destroy" or no `on_delete` destroys, anything else retains; only a
    /// literal duration ends the record, only a literal "destroy" applies
    /// its end.
    fn rule(self) -> Option<(Option<u64>, bool)> {
        if matches!(self.on_delete, Arg::Absent | Arg::Literal("destroy")) {
            return None;
        }
        let secs = match self.retain_for {
            Arg::Literal("30d") => Some(30 * 86_400),
            Arg::Literal("12h") => Some(12 * 3_600),
            Arg::Literal("90m") => Some(90 * 60),
            _ => None,
        };
        Some((secs, self.expire == Arg::Literal("destroy")))
    }

    fn add_to(self, expressions: &mut Value) {
        for (name, arg) in [
            ("on_delete", self.on_delete),
            ("retain_for", self.retain_for),
            ("expire", self.expire),
        ] {
            match arg {
                Arg::Absent => {}
                Arg::Literal(text) => expressions[name] = json!({"constant_value": text}),
                Arg::Reference => {
                    expressions[name] = json!({"references": [format!("var.{name}")]});
                }
            }
        }
    }
}

/// `plan` (a plan JSON of the model) with `args[i]` added to annotation `p{i}`.
fn with_retain_args(plan: &Value, args: &[RetainArgs]) -> Value {
    let add = |list: &mut Value| {
        for resource in list.as_array_mut().unwrap() {
            let name = resource["name"].as_str().unwrap();
            let i: usize = name.strip_prefix('p').unwrap().parse().unwrap();
            args[i].add_to(&mut resource["expressions"]);
        }
    };
    let mut plan = plan.clone();
    let root = &mut plan["configuration"]["root_module"];
    add(&mut root["resources"]);
    for call in root["module_calls"].as_object_mut().unwrap().values_mut() {
        add(&mut call["module"]["resources"]);
    }
    plan
}

fn about_retain(warning: &str) -> bool {
    ["on_delete", "retain_for", "expire"]
        .iter()
        .any(|a| warning.contains(&format!(": {a} ")))
}

/// Memory's delete rule for an instance covered by annotations with these
/// rules: none if none retains; otherwise what keeps longest (for ever over
/// any time, the longer time, a held end over an applied one).
fn combined(rules: &[(Option<u64>, bool)]) -> Option<abode_guard::RetainRule> {
    if rules.is_empty() {
        return None;
    }
    let for_ever = rules.iter().any(|(secs, _)| secs.is_none());
    Some(abode_guard::RetainRule {
        retain_for_secs: if for_ever {
            None
        } else {
            rules.iter().filter_map(|(secs, _)| *secs).max()
        },
        expire: if rules.iter().all(|(_, destroy)| *destroy) {
            abode_guard::Expire::Destroy
        } else {
            abode_guard::Expire::Hold
        },
    })
}

proptest! {
    // About 4 ms a case.
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn a_retaining_delete_never_destroys_what_it_retains(
        case in delete_case(),
        initiator in prop::sample::select(vec![Initiator::Person, Initiator::System]),
    ) {
        let plan = case.plan(|_| false);
        let rules = guard_rules(&case.model);
        let report = abode_guard::evaluate_delete(&plan, initiator, &rules, &case.retain());
        let want = expected_delete(&case, initiator);
        let got = got_delete(&report);
        prop_assert_eq!(&got, &want, "retaining {:?}", case.retain_list);

        // (a) Blocked iff an object of a retained resource is destroyed, for a
        // person's delete; in any delete, the rest decides as without retain.
        let destroys_retained = case
            .changes
            .iter()
            .any(|i| case.kept(i) && i.actions.contains(&"delete"));
        prop_assert!(case.hostile || !destroys_retained);
        let overall = want.protected.iter().map(|(_, d)| *d).max().unwrap_or(Decision::Allow);
        prop_assert_eq!(report.decision, overall);
        if initiator == Initiator::Person {
            prop_assert_eq!(report.decision == Decision::Block, destroys_retained);
        }
        let rest = case.plan(|i| case.kept(i));
        let rest_decision =
            abode_guard::evaluate_as(&rest, BuildIntent::Delete, initiator, &rules).decision;
        if destroys_retained {
            prop_assert_eq!(report.decision, Decision::Block);
        } else {
            prop_assert_eq!(report.decision, rest_decision);
        }

        // (b) Each forgotten object once in `retained`, and nowhere else.
        for kept in &report.retained {
            prop_assert!(!report.protected_changes.iter().any(|c| c.address == kept.address
                && c.deposed == kept.deposed));
            prop_assert!(!report.unprotected_destroys.iter().any(|c| c.address == kept.address
                && kept.deposed.is_none()));
        }
        let text = abode_guard::render_text(&report, false);
        for (address, _) in &want.retained {
            prop_assert!(text.contains(&format!("  = {address}")), "{}", text);
        }

        // (c) Without a retain list, exactly the delete of `evaluate_as`.
        prop_assert_eq!(
            abode_guard::evaluate_delete(&plan, initiator, &rules, &[]),
            abode_guard::evaluate_as(&plan, BuildIntent::Delete, initiator, &rules)
        );
    }

    #[test]
    fn retain_arguments_decide_nothing_else(
        model in model(),
        format in format(),
        args in prop::collection::vec(retain_args(), 6),
        twins in any::<bool>(),
    ) {
        // Two more annotations on a resource the plan keeps, so that memory
        // often combines two delete rules for one instance.
        let mut model = model;
        let kept = model.instances.iter().find(|i| {
            !is_annotation(i) && !i.deposed && !matches!(i.actions, ["delete"] | ["forget"] | ["read"])
        });
        if let (true, Some(kept)) = (twins, kept) {
            let twin = Annotation {
                scope: kept.module.map(|(m, _)| m),
                form: Form::Direct { one_instance: false },
                resource: kept.resource,
                pick: false,
                mode: None,
            };
            model.annotations.extend([twin.clone(), twin]);
        }
        let plain_json = plan_json(&model, format);
        let plain = abode_guard::read_plan_slice(&serde_json::to_vec(&plain_json).unwrap()).unwrap();
        let with_json = with_retain_args(&plain_json, &args);
        let with = abode_guard::read_plan_slice(&serde_json::to_vec(&with_json).unwrap()).unwrap();
        let rules = guard_rules(&model);

        // (c) on any plan: no retain list is the delete of `evaluate_as`.
        for initiator in [Initiator::Person, Initiator::System] {
            prop_assert_eq!(
                abode_guard::evaluate_delete(&with, initiator, &rules, &[]),
                abode_guard::evaluate_as(&with, BuildIntent::Delete, initiator, &rules)
            );
        }

        // (d) Every build's report is the same with and without them, but
        // for the warnings about them.
        let builds = [BuildIntent::Start, BuildIntent::Stop, BuildIntent::Delete, BuildIntent::Claim]
            .into_iter()
            .flat_map(|t| [(t, Initiator::Person), (t, Initiator::System)]);
        for (transition, initiator) in builds {
            let before = abode_guard::evaluate_as(&plain, transition, initiator, &rules);
            let mut after = abode_guard::evaluate_as(&with, transition, initiator, &rules);
            prop_assert!(!before.warnings.iter().any(|w| about_retain(w)));
            after.warnings.retain(|w| !about_retain(w));
            prop_assert_eq!(&after, &before, "{} build by the {}", transition, initiator);
        }

        // Memory: the same instances with the same modes, now with the
        // delete rule of the annotations covering each.
        for transition in [BuildIntent::Start, BuildIntent::Stop] {
            let before = abode_guard::protections_after_apply(&plain, transition, &rules, &[]);
            let after = abode_guard::protections_after_apply(&with, transition, &rules, &[]);
            let strip = |m: &[abode_guard::RememberedProtection]| -> Vec<(String, Mode)> {
                m.iter().map(|m| (m.address.clone(), m.mode)).collect()
            };
            prop_assert_eq!(strip(&after), strip(&before));
            prop_assert!(before.iter().all(|m| m.retain.is_none()));
            if format != Format::V1 {
                continue;
            }
            for remembered in &after {
                let instance = model
                    .instances
                    .iter()
                    .find(|i| i.address() == remembered.address)
                    .unwrap();
                let rules: Vec<(Option<u64>, bool)> = model
                    .annotations
                    .iter()
                    .zip(&args)
                    .filter(|(a, _)| {
                        a.target().covers(instance, &instance.name())
                            || (instance.moved && a.target().covers(instance, &instance.old_name()))
                    })
                    .filter_map(|(_, args)| args.rule())
                    .collect();
                prop_assert_eq!(remembered.retain, combined(&rules), "{}", remembered.address);
            }
        }
    }
}
