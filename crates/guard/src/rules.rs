//! Protection rules: which resources must survive, and how strictly.
//!
//! Rules come from the caller (command-line flags, the platform's memory of a
//! workspace) and from the template itself: every `abode_protect` resource in the
//! plan's `configuration` names its target through the references of its
//! `resource_id` expression, which this module resolves through modules,
//! module outputs, `count` and `for_each`.

use crate::address::{Address, ModuleStep, Reference};
use crate::annotation::PROTECT_TYPE;
use crate::plan::{ConfigModule, ConfigResource, Expression, Plan, ResourceMode};
use serde::{Deserialize, Serialize};
use std::fmt;

/// How strictly a rule holds. The order matters: the strictest rule wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The build waits until someone allowed to confirm says yes to this plan.
    Confirm,
    /// The build fails; only a fixed template or an explicit release helps.
    Block,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "confirm" => Some(Mode::Confirm),
            "block" => Some(Mode::Block),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Confirm => "confirm",
            Mode::Block => "block",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a rule protects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A resource (all its instances) or one instance.
    Address(Address),
    /// Every resource of a type, wherever it is.
    Type(String),
}

/// Where a rule came from, so a report can say who asked for the protection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Given by the caller (`--protect`, `--protect-type`).
    Caller,
    /// An `abode_protect` resource in the template, by its configuration address.
    Annotation(String),
    /// Remembered by the platform from an earlier build of the workspace.
    Remembered,
    /// A retained resource the platform keeps (`abode retained`), in the
    /// build that adopts it or destroys it.
    Retained,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub target: Target,
    pub mode: Mode,
    pub origin: Origin,
    /// What an intentional workspace delete does with what the rule covers:
    /// `None` destroys it (the default), `Some` keeps it as a retained
    /// resource (`on_delete = "retain"`).
    pub retain: Option<RetainRule>,
    /// What a confirmed destroy or replacement of what the rule covers
    /// takes first (`snapshot`, `snapshot_command`).
    pub snapshot: SnapshotRule,
}

/// An `abode_protect`'s `snapshot` and `snapshot_command` (issue 47): what
/// the provisioner takes before it applies a confirmed plan that destroys
/// or replaces the resource. Only literals are read, like the delete rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SnapshotRule {
    /// `snapshot = true|false`; `None` when left out (an `abode_volume` is
    /// archived, nothing else is).
    pub archive: Option<bool>,
    /// `snapshot_command`: `Ok` the command, `Err` why it cannot be read
    /// (a confirmed plan whose command is unreadable applies nothing).
    pub command: Option<Result<String, String>>,
}

impl SnapshotRule {
    /// Whether a resource of `resource_type` covered by these rules has its
    /// files archived: an `abode_volume` unless a rule says `false`.
    pub fn archives(rules: &[&SnapshotRule], resource_type: &str) -> bool {
        resource_type == "abode_volume" && !rules.iter().any(|rule| rule.archive == Some(false))
    }
}

/// An `abode_protect`'s `on_delete = "retain"`: the delete forgets the
/// resource instead of destroying it, and the platform keeps a record of
/// it for `retain_for` (for ever when absent), after which `expire` says
/// whether its destroy is held for a person or applied.
///
/// Its order is only for sorting (it puts "for ever" first); several rules on
/// one resource combine with [`RetainRule::keeping_longest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RetainRule {
    /// How long the record stays open, in seconds (`retain_for = "30d"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain_for_secs: Option<u64>,
    #[serde(default)]
    pub expire: Expire,
}

impl RetainRule {
    /// What two rules on one resource mean together: whatever keeps it
    /// longer. For ever (no `retain_for`) if either keeps it for ever, else
    /// the longer time; and an expired record's destroy held if either holds
    /// it. Keeping too much is undone with one command; a destroy is not.
    pub fn keeping_longest(self, other: RetainRule) -> RetainRule {
        RetainRule {
            retain_for_secs: match (self.retain_for_secs, other.retain_for_secs) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            },
            expire: match (self.expire, other.expire) {
                (Expire::Destroy, Expire::Destroy) => Expire::Destroy,
                _ => Expire::Hold,
            },
        }
    }
}

/// What happens when a retained resource's time is up.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Expire {
    /// Its destroy is queued and held for a person's confirmation.
    #[default]
    Hold,
    /// Its destroy is queued and applied (the owner was told a week before).
    Destroy,
}

impl Expire {
    pub fn parse(text: &str) -> Option<Expire> {
        match text {
            "hold" => Some(Expire::Hold),
            "destroy" => Some(Expire::Destroy),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Expire::Hold => "hold",
            Expire::Destroy => "destroy",
        }
    }
}

/// A duration as templates write it (`30d`, `12h`, `90m`), judged as the
/// provider judges it.
pub use abode_contract::retain::parse_retain_for;

impl Rule {
    pub fn address(address: Address, mode: Mode, origin: Origin) -> Rule {
        Rule {
            target: Target::Address(address),
            mode,
            origin,
            retain: None,
            snapshot: SnapshotRule::default(),
        }
    }

    pub fn resource_type(resource_type: &str, mode: Mode, origin: Origin) -> Rule {
        Rule {
            target: Target::Type(resource_type.to_string()),
            mode,
            origin,
            retain: None,
            snapshot: SnapshotRule::default(),
        }
    }

    pub fn covers(&self, address: Option<&Address>, resource_type: &str) -> bool {
        match &self.target {
            Target::Type(t) => t == resource_type,
            Target::Address(rule) => address.is_some_and(|a| rule.covers(a)),
        }
    }

    /// A short description for reports: `abode_protect.home (confirm)`.
    pub fn describe(&self) -> String {
        let target = match &self.target {
            Target::Address(a) => a.to_string(),
            Target::Type(t) => format!("every {t}"),
        };
        match &self.origin {
            Origin::Caller => format!("rule for {target}"),
            Origin::Annotation(by) => format!("{by} on {target}"),
            Origin::Remembered => format!("remembered protection of {target}"),
            Origin::Retained => format!("the retained resource {target}"),
        }
    }
}

/// Annotations found in a plan, and what could not be understood about them.
#[derive(Debug, Default)]
pub struct Annotations {
    pub rules: Vec<Rule>,
    /// Annotations whose reference leads nowhere Abode can see
    /// (`resource_id = local.home_id`): they protect by the id value instead.
    pub by_id: Vec<IdRule>,
    pub warnings: Vec<String>,
    /// Annotations that say `on_delete = "retain"` of something Terraform
    /// cannot forget by address (a data source, nothing Abode can follow,
    /// a module instance hidden by a computed key): a push refuses them,
    /// each with its one-line reason.
    pub unforgettable: Vec<String>,
}

/// An annotation that protects whatever object has one of `ids` as its `id`.
#[derive(Debug, Clone)]
pub struct IdRule {
    pub annotation: String,
    pub ids: Vec<String>,
    pub mode: Mode,
}

/// Reads every `abode_protect` annotation in the plan's configuration.
pub fn annotations(plan: &Plan) -> Annotations {
    let mut found = Annotations::default();
    if let Some(config) = &plan.configuration {
        walk_module(&config.root_module, &[], plan, &mut found);
    }
    found
}

fn walk_module(module: &ConfigModule, prefix: &[ModuleStep], plan: &Plan, found: &mut Annotations) {
    for resource in &module.resources {
        if resource.mode == ResourceMode::Managed && resource.resource_type == PROTECT_TYPE {
            read_annotation(resource, module, prefix, plan, found);
        }
    }
    for (name, call) in &module.module_calls {
        let mut inner = prefix.to_vec();
        inner.push(ModuleStep {
            name: name.clone(),
            key: None,
        });
        walk_module(&call.module, &inner, plan, found);
    }
}

fn display_path(prefix: &[ModuleStep], local: &str) -> String {
    let mut out = String::new();
    for step in prefix {
        out.push_str("module.");
        out.push_str(&step.name);
        out.push('.');
    }
    out.push_str(local);
    out
}

fn read_annotation(
    resource: &ConfigResource,
    module: &ConfigModule,
    prefix: &[ModuleStep],
    plan: &Plan,
    found: &mut Annotations,
) {
    let name = display_path(prefix, &resource.address);
    let mode = annotation_mode(resource, &name, plan, &mut found.warnings);
    let retain = annotation_retain(resource, &name, &mut found.warnings);
    let snapshot = annotation_snapshot(resource, &name, &mut found.warnings);
    let Some(expression) = resource
        .expressions
        .get("resource_id")
        .and_then(Expression::from_value)
    else {
        found.warnings.push(format!(
            "{name} has no resource_id reference, so it protects nothing"
        ));
        return;
    };
    let mut targets = Vec::new();
    let mut notes = Notes::default();
    resolve(
        &expression.references,
        resource,
        module,
        prefix,
        0,
        &mut targets,
        &mut notes,
    );
    if notes.steps >= MAX_STEPS {
        found.warnings.push(format!(
            "{name}: resource_id leads through too many module outputs for Abode to follow \
             them all, so it may protect less than intended; reference the resource more directly"
        ));
    }
    notes.whole_modules.dedup();
    for call in &notes.whole_modules {
        found.warnings.push(format!(
            "{name}: resource_id refers to {call} without an output Abode can see \
             (a computed module key hides it), so everything its outputs refer to is protected; \
             use a literal key or for_each = {call} with each.value.OUTPUT"
        ));
    }
    if retain.is_some() && (targets.is_empty() || !notes.whole_modules.is_empty()) {
        let what = if !notes.whole_modules.is_empty() {
            format!(
                "{} through a computed module key",
                notes.whole_modules.join(", ")
            )
        } else if notes.unresolved.is_empty() {
            "no resource".to_string()
        } else {
            notes.unresolved.join(", ")
        };
        found.unforgettable.push(format!(
            "{name}: on_delete = \"retain\" needs a managed resource Terraform can forget by its address, but resource_id refers to {what}"
        ));
    }
    if targets.is_empty() {
        let what = if notes.unresolved.is_empty() {
            "no resource".to_string()
        } else {
            notes.unresolved.join(", ")
        };
        let mut ids: Vec<String> = plan
            .changes
            .iter()
            .filter(|c| c.resource_type == PROTECT_TYPE && address_base(&c.address) == name)
            .flat_map(|c| c.protected_ids.iter().cloned())
            .collect();
        ids.sort();
        ids.dedup();
        let fallback = if ids.is_empty() {
            "so it protects nothing"
        } else {
            "so it protects only what has the id its resource_id holds, and only while the annotation exists"
        };
        found.warnings.push(format!(
            "{name}: resource_id refers to {what}, which Abode cannot follow to a resource, \
             {fallback}; reference the protected resource's id directly"
        ));
        if !ids.is_empty() {
            found.by_id.push(IdRule {
                annotation: name.clone(),
                ids,
                mode,
            });
        }
    }
    for target in targets {
        let mut rule = Rule::address(target, mode, Origin::Annotation(name.clone()));
        rule.retain = retain;
        rule.snapshot = snapshot.clone();
        found.rules.push(rule);
    }
}

/// The annotation's delete rule. Only literals are read: what a delete
/// keeps must be known from the template itself. A value Abode cannot read
/// retains (keeping too much costs money; destroying by mistake loses data).
fn annotation_retain(
    resource: &ConfigResource,
    name: &str,
    warnings: &mut Vec<String>,
) -> Option<RetainRule> {
    let literal = |attribute: &str| -> Option<Result<String, ()>> {
        let expression = resource
            .expressions
            .get(attribute)
            .and_then(Expression::from_value)?;
        Some(match &expression.constant_value {
            Some(serde_json::Value::String(text)) => Ok(text.clone()),
            _ => Err(()),
        })
    };
    match literal("on_delete") {
        None => return None,
        Some(Ok(text)) if text == "destroy" => return None,
        Some(Ok(text)) if text == "retain" => {}
        Some(_) => warnings.push(format!(
            "{name}: on_delete is not the literal \"retain\" or \"destroy\"; a delete retains it"
        )),
    }
    let retain_for_secs = match literal("retain_for") {
        None => None,
        Some(Ok(text)) => match parse_retain_for(&text) {
            Some(seconds) => Some(seconds),
            None => {
                warnings.push(format!(
                    "{name}: retain_for is not a duration such as \"30d\"; kept until someone destroys it"
                ));
                None
            }
        },
        Some(Err(())) => {
            warnings.push(format!(
                "{name}: retain_for is not a literal; kept until someone destroys it"
            ));
            None
        }
    };
    let expire = match literal("expire") {
        None => Expire::Hold,
        Some(Ok(text)) => Expire::parse(&text).unwrap_or_else(|| {
            warnings.push(format!(
                "{name}: expire is neither \"hold\" nor \"destroy\"; an expired record's destroy is held"
            ));
            Expire::Hold
        }),
        Some(Err(())) => {
            warnings.push(format!(
                "{name}: expire is not a literal; an expired record's destroy is held"
            ));
            Expire::Hold
        }
    };
    Some(RetainRule {
        retain_for_secs,
        expire,
    })
}

/// The annotation's snapshot rule. A `snapshot` Abode cannot read
/// archives (an archive too many costs disk; one too few loses data).
fn annotation_snapshot(
    resource: &ConfigResource,
    name: &str,
    warnings: &mut Vec<String>,
) -> SnapshotRule {
    let constant = |attribute: &str| {
        resource
            .expressions
            .get(attribute)
            .and_then(Expression::from_value)
            .map(|expression| expression.constant_value)
    };
    let archive = match constant("snapshot") {
        None => None,
        Some(Some(serde_json::Value::Bool(archive))) => Some(archive),
        Some(_) => {
            warnings.push(format!(
                "{name}: snapshot is not the literal true or false; a confirmed destroy archives it"
            ));
            Some(true)
        }
    };
    let command = match constant("snapshot_command") {
        None => None,
        Some(Some(serde_json::Value::String(command))) => Some(Ok(command)),
        Some(_) => {
            let why = format!(
                "{name}: snapshot_command is not a literal string, so Abode cannot know what it runs"
            );
            warnings.push(format!(
                "{why}; a confirmed destroy of what it protects applies nothing"
            ));
            Some(Err(why))
        }
    };
    SnapshotRule { archive, command }
}

fn annotation_mode(
    resource: &ConfigResource,
    name: &str,
    plan: &Plan,
    warnings: &mut Vec<String>,
) -> Mode {
    let Some(expression) = resource
        .expressions
        .get("mode")
        .and_then(Expression::from_value)
    else {
        return Mode::Confirm;
    };
    if let Some(value) = &expression.constant_value {
        return match value.as_str().and_then(Mode::parse) {
            Some(mode) => mode,
            None => {
                warnings.push(format!(
                    "{name}: mode {value} is neither \"confirm\" nor \"block\"; treated as block"
                ));
                Mode::Block
            }
        };
    }
    // Not a literal: take what the plan says each instance will be.
    let planned: Vec<Mode> = plan
        .changes
        .iter()
        .filter(|c| c.resource_type == PROTECT_TYPE && address_base(&c.address) == name)
        .filter_map(|c| c.planned_protect_mode.as_deref().and_then(Mode::parse))
        .collect();
    match planned.into_iter().max() {
        Some(mode) => mode,
        None => {
            warnings.push(format!(
                "{name}: mode is not known before apply; treated as block"
            ));
            Mode::Block
        }
    }
}

/// `module.a["x"].t.n[0]` → `module.a.t.n`: the configuration address of an instance.
fn address_base(address: &str) -> String {
    match Address::parse(address) {
        Ok(mut a) => {
            a.key = None;
            for step in &mut a.module {
                step.key = None;
            }
            a.to_string()
        }
        Err(_) => address.to_string(),
    }
}

/// How deep module outputs may chain before the guard gives up (cycles cannot
/// happen in valid Terraform, but the input is not trusted).
const MAX_DEPTH: usize = 16;

/// What `resolve` could not follow exactly, for the annotation's warnings.
#[derive(Default)]
struct Notes {
    /// References that lead to no resource.
    unresolved: Vec<String>,
    /// Module calls referenced without an output (`module.home[each.key].id`).
    whole_modules: Vec<String>,
    /// How many expressions were followed; bounded by [`MAX_STEPS`].
    steps: usize,
}

/// How many expressions one annotation may lead through. Outputs that refer to
/// several outputs of a nested module multiply at every level, so depth alone
/// does not bound the walk.
const MAX_STEPS: usize = 10_000;

fn resolve(
    references: &[String],
    resource: &ConfigResource,
    module: &ConfigModule,
    prefix: &[ModuleStep],
    depth: usize,
    targets: &mut Vec<Address>,
    notes: &mut Notes,
) {
    if depth > MAX_DEPTH || notes.steps >= MAX_STEPS {
        return;
    }
    notes.steps += 1;
    // Terraform lists `x.home[0].id`, `x.home[0]` and `x.home` for one use; keep
    // the instances named (every one of them: `[x.home[0].id, x.home[1].id]`
    // protects both), and the whole resource only when no instance is named.
    let mut found: Vec<Address> = Vec::new();
    for reference in references {
        match Reference::parse(reference) {
            Reference::Resource(address) if !address.data => {
                let address = address.within(prefix);
                let same_resource = |f: &Address| {
                    f.module == address.module
                        && f.resource_type == address.resource_type
                        && f.name == address.name
                };
                if address.key.is_none() {
                    if !found.iter().any(same_resource) {
                        found.push(address);
                    }
                } else {
                    found.retain(|f| !(f.key.is_none() && same_resource(f)));
                    if !found.contains(&address) {
                        found.push(address);
                    }
                }
            }
            Reference::Resource(_) => notes.unresolved.push(reference.clone()),
            Reference::ModuleOutput { call, output } => {
                let inner_module = module.module_calls.get(&call.name).map(|c| &c.module);
                let expression = inner_module
                    .and_then(|m| m.outputs.get(&output))
                    .and_then(|o| o.expression.as_ref());
                match (inner_module, expression) {
                    (Some(inner), Some(expression)) => {
                        let mut inner_prefix = prefix.to_vec();
                        inner_prefix.push(call.clone());
                        resolve(
                            &expression.references,
                            resource,
                            inner,
                            &inner_prefix,
                            depth + 1,
                            &mut found,
                            notes,
                        );
                    }
                    _ => notes.unresolved.push(reference.clone()),
                }
            }
            Reference::ModuleCall(call) => {
                // Terraform also lists `module.home["a"]` beside `module.home["a"].volume_id`;
                // only a module call whose output is nowhere named stands for all its outputs.
                let output_named = references.iter().any(|r| {
                    matches!(Reference::parse(r),
                        Reference::ModuleOutput { call: c, .. } if c.name == call.name)
                });
                if output_named {
                    continue;
                }
                let Some(inner) = module.module_calls.get(&call.name).map(|c| &c.module) else {
                    notes.unresolved.push(reference.clone());
                    continue;
                };
                notes
                    .whole_modules
                    .push(display_path(prefix, &format!("module.{}", call.name)));
                let mut inner_prefix = prefix.to_vec();
                inner_prefix.push(call);
                for output in inner.outputs.values() {
                    if let Some(expression) = &output.expression {
                        resolve(
                            &expression.references,
                            resource,
                            inner,
                            &inner_prefix,
                            depth + 1,
                            &mut found,
                            notes,
                        );
                    }
                }
            }
            Reference::Each { .. } => {
                // `resource_id = each.value.id` with `for_each = x.vols`: the
                // annotation protects what it iterates over. With `for_each =
                // module.home`, `each.value.volume_id` names the module's output.
                if let Some(for_each) = &resource.for_each_expression {
                    let mut refs = Vec::new();
                    for r in &for_each.references {
                        match Reference::parse(r) {
                            Reference::Each { .. } => {}
                            Reference::ModuleCall(_) => {
                                refs.extend(each_outputs(references).map(|o| format!("{r}.{o}")));
                                refs.push(r.clone());
                            }
                            _ => refs.push(r.clone()),
                        }
                    }
                    resolve(
                        &refs,
                        resource,
                        module,
                        prefix,
                        depth + 1,
                        &mut found,
                        notes,
                    );
                }
            }
            Reference::Other(text) => {
                let harmless = text.starts_with("count.") || text == "each";
                if !harmless {
                    notes.unresolved.push(text);
                }
            }
        }
    }
    targets.extend(found);
}

/// The attributes read from `each.value` (`each.value.volume_id` → `volume_id`).
fn each_outputs(references: &[String]) -> impl Iterator<Item = String> + '_ {
    references.iter().filter_map(|r| match Reference::parse(r) {
        Reference::Each { attribute } => attribute,
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// Sixteen nested modules whose four outputs each refer to all four outputs of
    /// the next: valid Terraform, and 4^16 paths for a naive walk.
    fn fan_out_plan() -> Plan {
        let mut module = json!({"resources": [{"address": "x.disk", "type": "x", "name": "disk"}],
                                "outputs": {"o0": {"expression": {"references": ["x.disk.id", "x.disk"]}}}});
        for _ in 0..16 {
            let refs: Vec<String> = (0..4).map(|i| format!("module.m.o{i}")).collect();
            let outputs: serde_json::Map<String, Value> = (0..4)
                .map(|i| (format!("o{i}"), json!({"expression": {"references": refs}})))
                .collect();
            module = json!({"module_calls": {"m": {"module": module}}, "outputs": outputs});
        }
        module["resources"] = json!([{"address": "abode_protect.home", "type": PROTECT_TYPE,
            "name": "home", "expressions": {"resource_id": {"references": ["module.m.o0"]}}}]);
        let plan = json!({"format_version": "1.2", "planned_values": {},
                          "configuration": {"root_module": module}});
        crate::read_plan_slice(plan.to_string().as_bytes()).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn module_output_fan_out_is_bounded() {
        let found = annotations(&fan_out_plan());
        assert!(
            found.warnings.iter().any(|w| w.contains("too many")),
            "{:?}",
            found.warnings
        );
    }
}
