//! The rules (docs/lint.md). Per resource: what a persistent resource's
//! identity and count derive from, what an `abode_protect` names, and where
//! the agent's token and script go. Per template: which persistent resources
//! no `abode_protect` covers, and protections of resources every stop deletes.

use std::collections::{BTreeMap, BTreeSet};

use hcl_edit::expr::Expression;
use hcl_edit::structure::{Attribute, Body};
use hcl_edit::Span;

use crate::analysis::{block_span, Context, Instance, Record};
use crate::finding::{Finding, Rule};
use crate::model::{attributes_at, Resource};
use crate::taint::{Origin, Taint, Taints};

/// Attributes whose value ends up on a process's command line.
const COMMAND_LINE: &[&str] = &[
    "command",
    "args",
    "entrypoint",
    "cmd",
    "arguments",
    "inline",
];

pub(crate) fn check_resource(instance: &mut Instance<'_, '_>, resource: &Resource<'_>) {
    let address = format!("{}{}.{}", instance.prefix, resource.kind, resource.name);
    let body = &resource.block.body;
    let mut own_count = Taints::new();
    let mut counters = Vec::new();
    for key in ["count", "for_each"] {
        if let Some(attribute) = body.get_attribute(key) {
            let taints = instance.eval(&attribute.value, None);
            own_count.extend(taints.iter().cloned());
            counters.push((attribute, taints));
        }
    }
    let persistent = instance
        .ctx
        .types
        .identity(&resource.kind)
        .map(<[String]>::to_vec);
    if let Some(identity) = &persistent {
        check_persistent(
            instance, resource, &address, identity, &own_count, &counters,
        );
    }
    let protects = (resource.kind == "abode_protect")
        .then(|| check_protect(instance, resource, &address, &own_count));
    if resource.kind != "abode_agent" {
        check_agent_use(instance, resource, &address, &own_count);
    }
    let mut count = own_count;
    count.extend(instance.inherited_count.iter().cloned());
    instance.records.push(Record {
        address,
        file: resource.file,
        span: block_span(resource.block),
        persistent: persistent.is_some(),
        count,
        protects,
    });
}

fn check_persistent(
    instance: &mut Instance<'_, '_>,
    resource: &Resource<'_>,
    address: &str,
    identity: &[String],
    own_count: &Taints,
    counters: &[(&Attribute, Taints)],
) {
    let ctx = instance.ctx;
    let file = resource.file;
    for (attribute, taints) in counters {
        let key = attribute.key.as_str();
        let span = attribute.key.span();
        if let Some(sources) = describe_mutable(taints) {
            instance.findings.push(ctx.finding(
                Rule::PersistentIdentityMutable,
                (file, span.clone()),
                address,
                Some(key.to_string()),
                format!(
                    "`{key}` decides which instances of {address} exist and derives from {sources}: \
                     a change deletes instances (and their data) or creates empty ones"
                ),
                format!(
                    "Do not derive `{key}` of a persistent resource from inputs that change after \
                     creation; make the parameter immutable or keep `{key}` constant"
                ),
            ));
        }
        if let Some(reference) = transition_reference(taints) {
            instance
                .findings
                .push(deleted_at_stop(ctx, file, span, address, key, &reference));
        }
    }
    if let Some(reference) = transition_reference(&instance.inherited_count) {
        let calls = instance.call_path.join(", ");
        instance.findings.push(ctx.finding(
            Rule::PersistentDeletedAtStop,
            (file, block_span(resource.block)),
            address,
            None,
            format!(
                "{address} is inside {calls}, whose `count`/`for_each` follows the transition \
                 (`{reference}`): every stop deletes it and its data"
            ),
            "Call the module that holds persistent resources without `start_count`; put only the \
             compute (container, VM, process) under it"
                .to_string(),
        ));
    }
    // What `ignore_changes` covers never replaces the resource.
    let ignored = ignored_by(&resource.block.body);
    for path in identity {
        let top = path.split('.').next().unwrap_or(path);
        if ignored.covers(top) {
            continue;
        }
        for attribute in attributes_at(&resource.block.body, path) {
            let taints = instance.eval(&attribute.value, Some(own_count));
            let span = attribute.key.span();
            if let Some(sources) = describe_mutable(&taints) {
                instance.findings.push(ctx.finding(
                    Rule::PersistentIdentityMutable,
                    (file, span.clone()),
                    address,
                    Some(path.clone()),
                    format!(
                        "`{path}` decides the identity of {address} (changing it replaces the resource) \
                         and derives from {sources}: the change replaces it with an empty one"
                    ),
                    format!(
                        "Derive `{path}` from what never changes, such as `data.abode_workspace.<name>.id`, \
                         and put names that may change in labels or tags, which update in place"
                    ),
                ));
            }
            if let Some(reference) = transition_reference(&taints) {
                instance
                    .findings
                    .push(deleted_at_stop(ctx, file, span, address, path, &reference));
            }
        }
    }
}

fn deleted_at_stop(
    ctx: &Context<'_>,
    file: usize,
    span: Option<std::ops::Range<usize>>,
    address: &str,
    attribute: &str,
    reference: &str,
) -> Finding {
    let (why, fix) = if attribute == "count" || attribute == "for_each" {
        (
            format!(
                "`{attribute}` of {address} follows the transition (`{reference}`), which leaves no \
                 instance when the workspace stops: every stop deletes it and its data (or, protected, \
                 holds every stop)"
            ),
            format!(
                "Remove `{attribute}` from {address}; keep only the compute (container, VM, process) \
                 under `start_count` and attach the persistent resource to it"
            ),
        )
    } else {
        (
            format!(
                "`{attribute}` of {address} follows the transition (`{reference}`), which differs \
                 between start and stop: every stop replaces it with an empty one"
            ),
            format!("Derive `{attribute}` from what stays the same across builds, such as the workspace id"),
        )
    };
    ctx.finding(
        Rule::PersistentDeletedAtStop,
        (file, span),
        address,
        Some(attribute.to_string()),
        why,
        fix,
    )
}

/// What an `abode_protect` names; a finding when it names no resource.
fn check_protect(
    instance: &mut Instance<'_, '_>,
    resource: &Resource<'_>,
    address: &str,
    own_count: &Taints,
) -> (Vec<Taint>, Option<std::ops::Range<usize>>) {
    let ctx = instance.ctx;
    let attribute = resource.block.body.get_attribute("resource_id");
    let targets: Vec<Taint> = match attribute {
        Some(attribute) => instance
            .eval(&attribute.value, Some(own_count))
            .into_iter()
            .filter(|t| matches!(t.origin, Origin::Resource(_)))
            .collect(),
        None => Vec::new(),
    };
    let span = attribute.map_or_else(|| block_span(resource.block), |a| a.key.span());
    if targets.is_empty() {
        instance.findings.push(
            ctx.finding(
                Rule::ProtectTargetUnknown,
                (resource.file, span.clone()),
                address,
                Some("resource_id".to_string()),
                format!(
                "{address} names no managed resource of this template in `resource_id` (a literal, \
                 variable or data source), so the guard protects nothing through it"
            ),
                "Reference the protected resource's id, e.g. `resource_id = abode_volume.home.id`"
                    .to_string(),
            ),
        );
    }
    (targets, span)
}

/// The agent rules: its token on a command line, and `ignore_changes` over
/// what carries its token or script.
fn check_agent_use(
    instance: &mut Instance<'_, '_>,
    resource: &Resource<'_>,
    address: &str,
    own_count: &Taints,
) {
    let mut carriers: BTreeMap<String, String> = BTreeMap::new();
    walk_agent(
        instance,
        resource,
        address,
        own_count,
        &resource.block.body,
        None,
        &mut carriers,
    );
    let ctx = instance.ctx;
    for lifecycle in resource.block.body.get_blocks("lifecycle") {
        let Some(ignore) = lifecycle.body.get_attribute("ignore_changes") else {
            continue;
        };
        let span = ignore.key.span();
        let (all, hits): (bool, Vec<(&String, &String)>) = match ignored_names(&ignore.value) {
            Ignored::All => (true, carriers.iter().take(1).collect()),
            Ignored::Names(names) => (
                false,
                carriers
                    .iter()
                    .filter(|(n, _)| names.contains(*n))
                    .collect(),
            ),
        };
        for (name, reference) in hits {
            let message = if all {
                format!(
                    "{address} runs the agent (`{name}` uses `{reference}`) and `ignore_changes = all` \
                     stops Terraform from updating it: when the agent is recreated it keeps the old \
                     token, which the platform no longer accepts, and the workspace never connects"
                )
            } else {
                format!(
                    "`ignore_changes` lists `{name}`, which carries the agent's token or script \
                     (`{reference}`): when the agent is recreated {address} keeps the old token, which \
                     the platform no longer accepts, and the workspace never connects"
                )
            };
            instance.findings.push(ctx.finding(
                Rule::AgentIgnoreChanges,
                (resource.file, span.clone()),
                address,
                Some("lifecycle.ignore_changes".to_string()),
                message,
                "List only attributes that must not change (e.g. `ignore_changes = [image]`), never \
                 the ones that carry the agent's token or init script"
                    .to_string(),
            ));
        }
    }
}

enum Ignored {
    All,
    Names(BTreeSet<String>),
}

impl Ignored {
    fn covers(&self, name: &str) -> bool {
        match self {
            Ignored::All => true,
            Ignored::Names(names) => names.contains(name),
        }
    }
}

/// What a resource's `lifecycle { ignore_changes = ... }` blocks cover.
fn ignored_by(body: &Body) -> Ignored {
    let mut names = BTreeSet::new();
    for lifecycle in body.get_blocks("lifecycle") {
        if let Some(attribute) = lifecycle.body.get_attribute("ignore_changes") {
            match ignored_names(&attribute.value) {
                Ignored::All => return Ignored::All,
                Ignored::Names(more) => names.extend(more),
            }
        }
    }
    Ignored::Names(names)
}

fn ignored_names(value: &Expression) -> Ignored {
    match value {
        Expression::Variable(v) if v.as_str() == "all" => Ignored::All,
        Expression::String(s) if s.value() == "all" => Ignored::All,
        Expression::Array(items) => {
            let mut names = BTreeSet::new();
            for item in items.iter() {
                match item {
                    Expression::Variable(v) => {
                        names.insert(v.as_str().to_string());
                    }
                    Expression::Traversal(t) => {
                        if let Expression::Variable(v) = &t.expr {
                            names.insert(v.as_str().to_string());
                        }
                    }
                    Expression::String(s) if s.value() == "*" => return Ignored::All,
                    Expression::String(s) => {
                        if let Some(first) = s.value().split(['.', '[']).next() {
                            names.insert(first.to_string());
                        }
                    }
                    _ => {}
                }
            }
            Ignored::Names(names)
        }
        _ => Ignored::Names(BTreeSet::new()),
    }
}

/// Walks a resource's attributes (nested blocks too) for the agent's token
/// and script, recording which top-level attribute carries them.
fn walk_agent(
    instance: &mut Instance<'_, '_>,
    resource: &Resource<'_>,
    address: &str,
    own_count: &Taints,
    body: &Body,
    top: Option<&str>,
    carriers: &mut BTreeMap<String, String>,
) {
    for attribute in body.attributes() {
        let key = attribute.key.as_str();
        if top.is_none() && matches!(key, "count" | "for_each" | "depends_on" | "provider") {
            continue;
        }
        let taints = instance.eval(&attribute.value, Some(own_count));
        let token = taints.iter().find(|t| t.origin == Origin::AgentToken);
        let carried = token.or_else(|| taints.iter().find(|t| t.origin == Origin::AgentScript));
        if let Some(carried) = carried {
            carriers
                .entry(top.unwrap_or(key).to_string())
                .or_insert_with(|| carried.reference.clone());
        }
        if let (Some(token), true) = (token, COMMAND_LINE.contains(&key)) {
            let ctx = instance.ctx;
            let reference = token.reference.clone();
            instance.findings.push(ctx.finding(
                Rule::AgentTokenOnCommandLine,
                (resource.file, attribute.key.span()),
                address,
                Some(key.to_string()),
                format!(
                    "`{key}` of {address} puts the agent token (`{reference}`) on a command line, which \
                     every local user can read (`ps`, /proc/PID/cmdline) and then act as this workspace's agent"
                ),
                format!(
                    "Pass the token in the environment (`ABODE_AGENT_TOKEN = {reference}`) and run the \
                     agent's `init_script`, which reads it from there"
                ),
            ));
        }
    }
    for block in body.blocks() {
        let ident = block.ident.as_str();
        if top.is_none() && ident == "lifecycle" {
            continue;
        }
        // A `dynamic "env"` block stands for `env` blocks.
        let name = if ident == "dynamic" {
            block.labels.first().map_or(ident, |l| l.as_str())
        } else {
            ident
        };
        walk_agent(
            instance,
            resource,
            address,
            own_count,
            &block.body,
            Some(top.unwrap_or(name)),
            carriers,
        );
    }
}

/// The rules over the whole template.
pub(crate) fn check_template(ctx: &Context<'_>, records: &[Record]) -> Vec<Finding> {
    let mut findings = Vec::new();
    let by_address: BTreeMap<&str, &Record> =
        records.iter().map(|r| (r.address.as_str(), r)).collect();
    let mut protected = BTreeSet::new();
    for record in records {
        let Some((targets, span)) = &record.protects else {
            continue;
        };
        for target in targets {
            let Origin::Resource(target_address) = &target.origin else {
                continue;
            };
            protected.insert(target_address.as_str());
            let Some(target_record) = by_address.get(target_address.as_str()) else {
                continue;
            };
            if let Some(reference) = transition_reference(&target_record.count) {
                let address = &record.address;
                findings.push(ctx.finding(
                    Rule::ProtectTargetDeletedAtStop,
                    (record.file, span.clone()),
                    address,
                    Some("resource_id".to_string()),
                    format!(
                        "{address} protects {target_address}, whose instances follow the transition \
                         (`{reference}`): every stop deletes it, so the guard holds every stop of every workspace"
                    ),
                    format!(
                        "Protect only what lives across stops: take {target_address} out from under \
                         `start_count` if it holds data, otherwise remove {address}"
                    ),
                ));
            }
        }
    }
    for record in records {
        if record.persistent && !protected.contains(record.address.as_str()) {
            let address = &record.address;
            findings.push(ctx.finding(
                Rule::PersistentUnprotected,
                (record.file, record.span.clone()),
                address,
                None,
                format!(
                    "{address} holds data that outlives builds, but no `abode_protect` names it: a plan \
                     that deletes or replaces it is applied without asking, unless the platform's own \
                     rules protect it"
                ),
                protect_fix(address),
            ));
        }
    }
    findings
}

fn protect_fix(address: &str) -> String {
    match address.rsplit_once("module.") {
        None => {
            let name = address.rsplit('.').next().unwrap_or("data");
            format!("Add `resource \"abode_protect\" \"{name}\" {{ resource_id = {address}.id }}`")
        }
        Some((_, local)) => {
            let local = local.split_once('.').map_or(local, |(_, rest)| rest);
            format!(
                "Add an `abode_protect` with `resource_id = {local}.id` inside its module, or one \
                 whose `resource_id` is a module output returning that id"
            )
        }
    }
}

/// `the owner's name (`data...`), which ...; ...` for the mutable inputs
/// among `taints`, or `None` when there are none.
fn describe_mutable(taints: &Taints) -> Option<String> {
    let parts: Vec<String> = taints
        .iter()
        .filter(|t| t.origin.is_mutable_input())
        .map(|t| {
            let reference = &t.reference;
            match &t.origin {
                Origin::OwnerName => format!(
                    "the owner's name (`{reference}`), which changes when the owner is renamed or a \
                     prebuilt workspace is claimed"
                ),
                Origin::WorkspaceName => format!(
                    "the workspace's name (`{reference}`), which changes when the workspace is renamed"
                ),
                Origin::TemplateVersion => format!(
                    "the template version (`{reference}`), which changes at every update to a new version"
                ),
                Origin::MutableParameter(name) => format!(
                    "the mutable parameter `{name}` (`{reference}`), which users may change at any build"
                ),
                _ => String::new(),
            }
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn transition_reference(taints: &Taints) -> Option<String> {
    taints
        .iter()
        .find(|t| t.origin == Origin::Transition)
        .map(|t| t.reference.clone())
}
