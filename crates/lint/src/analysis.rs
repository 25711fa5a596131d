//! One pass over a template: the root module, then every local module it
//! calls (once per call, with that call's inputs), each resource checked by
//! the rules as it is met (the caller hands them in with the [`Context`]),
//! then the rules that need the whole template (what `abode_protect` covers).

use std::collections::BTreeMap;
use std::ops::Range;

use hcl_edit::expr::Expression;
use hcl_edit::Span;

use crate::finding::{Finding, Rule};
use crate::model::{self, Module, Resource};
use crate::persistent::PersistentTypes;
use crate::source::Parsed;
use crate::taint::{self, Origin, Taint, Taints};

/// Modules nest at most this deep; deeper calls are not followed.
const MAX_MODULE_DEPTH: usize = 16;
/// References (a local naming a local naming a local...) are followed at
/// most this deep; a deeper chain is refused (`LintError::TooDeep`) rather
/// than read with a stack that could overflow or judged half-read.
pub(crate) const MAX_REFERENCE_DEPTH: usize = 128;
/// At most this many module instances in all: calls multiply (a module
/// calling another twice, sixteen deep, is 65,536 instances), and a template
/// with more is refused (`LintError::TooManyModules`) rather than read for
/// ever.
pub(crate) const MAX_MODULE_INSTANCES: usize = 1_000;

/// Non-persistent resources that are replaced when these attributes change;
/// a value read from them changes with what they derive from.
fn replace_triggers(kind: &str) -> &'static [&'static str] {
    match kind {
        k if k.starts_with("random_") => &["keepers"],
        "terraform_data" => &["triggers_replace"],
        "null_resource" => &["triggers"],
        "time_static" => &["triggers"],
        _ => &[],
    }
}

/// The rules that check one resource as the walk meets it (they record it
/// for the whole-template rules too): handed in by the caller, so that the
/// walk names no rule.
pub(crate) type CheckResource = fn(&mut Instance<'_, '_>, &Resource<'_>);

pub(crate) struct Context<'a> {
    pub files: &'a [Parsed],
    pub modules: BTreeMap<String, Module<'a>>,
    pub types: &'a PersistentTypes,
    /// Module instances analysed so far (the root not counted).
    instances: std::cell::Cell<usize>,
    /// Set when a call was not followed because of [`MAX_MODULE_INSTANCES`].
    pub too_many_instances: std::cell::Cell<bool>,
    /// What every resource of every instance is checked with.
    check_resource: CheckResource,
}

impl<'a> Context<'a> {
    pub(crate) fn new(
        files: &'a [Parsed],
        types: &'a PersistentTypes,
        check_resource: CheckResource,
    ) -> Context<'a> {
        let mut modules = BTreeMap::new();
        for file in files {
            if !modules.contains_key(&file.dir) {
                modules.insert(file.dir.clone(), Module::gather(files, &file.dir));
            }
        }
        Context {
            files,
            modules,
            types,
            instances: std::cell::Cell::new(0),
            too_many_instances: std::cell::Cell::new(false),
            check_resource,
        }
    }

    pub(crate) fn finding(
        &self,
        rule: Rule,
        (file, span): (usize, Option<Range<usize>>),
        resource: &str,
        attribute: Option<String>,
        message: String,
        fix: String,
    ) -> Finding {
        let parsed = &self.files[file];
        let (line, column) = parsed.position(span);
        Finding {
            rule,
            severity: rule.severity(),
            file: parsed.path.clone(),
            line,
            column,
            resource: resource.to_string(),
            attribute,
            message,
            fix,
        }
    }
}

/// What the whole-template rules need to know of each resource.
pub(crate) struct Record {
    pub address: String,
    pub file: usize,
    pub span: Option<Range<usize>>,
    pub persistent: bool,
    /// What its `count`/`for_each` (and its module calls') derive from.
    pub count: Taints,
    /// For an `abode_protect`: the resources its `resource_id` names, and
    /// where that attribute is.
    pub protects: Option<(Vec<Taint>, Option<Range<usize>>)>,
}

/// One module instance: a module folder with the inputs one call gives it.
pub(crate) struct Instance<'a, 'c> {
    pub ctx: &'c Context<'a>,
    pub module: &'c Module<'a>,
    pub prefix: String,
    dir: String,
    inputs: BTreeMap<String, Taints>,
    /// What the module calls leading here are counted by.
    pub inherited_count: Taints,
    /// The module calls leading here (`module.a`, `module.a.module.b`).
    pub call_path: Vec<String>,
    stack: Vec<String>,
    locals: BTreeMap<String, Option<Taints>>,
    triggers: BTreeMap<String, Option<Taints>>,
    children: BTreeMap<String, Option<BTreeMap<String, Taints>>>,
    /// How many references deep the current evaluation is.
    nesting: usize,
    /// Set when a chain of references went past [`MAX_REFERENCE_DEPTH`].
    pub too_deep: bool,
    pub records: Vec<Record>,
    pub findings: Vec<Finding>,
}

impl<'a, 'c> Instance<'a, 'c> {
    pub(crate) fn root(ctx: &'c Context<'a>, module: &'c Module<'a>) -> Instance<'a, 'c> {
        Instance {
            ctx,
            module,
            prefix: String::new(),
            dir: String::new(),
            inputs: BTreeMap::new(),
            inherited_count: Taints::new(),
            call_path: Vec::new(),
            stack: vec![String::new()],
            locals: BTreeMap::new(),
            triggers: BTreeMap::new(),
            children: BTreeMap::new(),
            nesting: 0,
            too_deep: false,
            records: Vec::new(),
            findings: Vec::new(),
        }
    }

    /// Checks every resource, then every module call.
    pub(crate) fn run(&mut self) {
        let module = self.module;
        let check_resource = self.ctx.check_resource;
        for resource in &module.resources {
            check_resource(self, resource);
        }
        for call in &module.calls {
            self.child(&call.name);
        }
    }

    /// What an expression derives from; `iteration` is what `each` and
    /// `count` derive from inside a counted resource.
    pub(crate) fn eval(&mut self, expression: &Expression, iteration: Option<&Taints>) -> Taints {
        let mut out = Taints::new();
        for path in taint::references(expression) {
            out.extend(self.resolve(&path, iteration));
        }
        out
    }

    fn resolve(&mut self, path: &[String], iteration: Option<&Taints>) -> Taints {
        let reference = path.join(".");
        let single = |origin| {
            Taints::from([Taint {
                origin,
                reference: reference.clone(),
            }])
        };
        if let Some(origin) = taint::abode_data_origin(path) {
            return single(origin);
        }
        let module = self.module;
        match path {
            [data, kind, name, rest @ ..] if data == "data" && kind == "abode_parameter" => {
                let value = rest.first().is_none_or(|a| a == "value");
                if value && module.parameters.get(name).copied().unwrap_or(false) {
                    single(Origin::MutableParameter(name.clone()))
                } else {
                    Taints::new()
                }
            }
            [local, name, ..] if local == "local" => self.local(name),
            [var, name, ..] if var == "var" => self.inputs.get(name).cloned().unwrap_or_default(),
            [m, call, output, ..] if m == "module" => self
                .child(call)
                .and_then(|outputs| outputs.get(output).cloned())
                .unwrap_or_default(),
            [first, ..] if first == "each" || first == "count" => {
                iteration.cloned().unwrap_or_default()
            }
            [kind, name, rest @ ..] => {
                let Some(resource) = module.resource(kind, name) else {
                    return Taints::new();
                };
                let address = format!("{}{kind}.{name}", self.prefix);
                let mut out = single(Origin::Resource(address));
                if kind == "abode_agent" {
                    match rest.first().map(String::as_str) {
                        Some("token") => out.extend(single(Origin::AgentToken)),
                        Some("init_script") => out.extend(single(Origin::AgentScript)),
                        _ => {}
                    }
                }
                out.extend(self.trigger_taints(resource));
                out
            }
            _ => Taints::new(),
        }
    }

    fn local(&mut self, name: &str) -> Taints {
        match self.locals.get(name) {
            Some(Some(done)) => return done.clone(),
            Some(None) => return Taints::new(), // a cycle: Terraform refuses it anyway
            None => {}
        }
        let module = self.module;
        let Some(local) = module.locals.get(name) else {
            return Taints::new();
        };
        if !self.deeper() {
            return Taints::new();
        }
        self.locals.insert(name.to_string(), None);
        let out = self.eval(&local.value, None);
        self.nesting -= 1;
        self.locals.insert(name.to_string(), Some(out.clone()));
        out
    }

    /// What replaces a non-persistent resource (a `random_id`'s keepers): a
    /// value read from it changes when they do.
    fn trigger_taints(&mut self, resource: &Resource<'a>) -> Taints {
        let triggers = replace_triggers(&resource.kind);
        if triggers.is_empty() {
            return Taints::new();
        }
        let key = format!("{}.{}", resource.kind, resource.name);
        match self.triggers.get(&key) {
            Some(Some(done)) => return done.clone(),
            Some(None) => return Taints::new(),
            None => {}
        }
        if !self.deeper() {
            return Taints::new();
        }
        self.triggers.insert(key.clone(), None);
        let mut out = Taints::new();
        for trigger in triggers {
            if let Some(attribute) = resource.block.body.get_attribute(trigger) {
                out.extend(
                    self.eval(&attribute.value, None)
                        .into_iter()
                        .filter(|t| t.origin.is_mutable_input() || t.origin == Origin::Transition),
                );
            }
        }
        self.nesting -= 1;
        self.triggers.insert(key, Some(out.clone()));
        out
    }

    /// Goes one reference deeper, unless that is too deep (then records it).
    fn deeper(&mut self) -> bool {
        if self.nesting >= MAX_REFERENCE_DEPTH {
            self.too_deep = true;
            return false;
        }
        self.nesting += 1;
        true
    }

    /// The outputs of module call `name`, analysing its module (once) the
    /// first time they are needed. `None` while it is being analysed.
    fn child(&mut self, name: &str) -> Option<&BTreeMap<String, Taints>> {
        if !self.children.contains_key(name) {
            self.children.insert(name.to_string(), None);
            let outputs = self.analyse_child(name);
            self.children.insert(name.to_string(), Some(outputs));
        }
        self.children.get(name).and_then(Option::as_ref)
    }

    fn analyse_child(&mut self, name: &str) -> BTreeMap<String, Taints> {
        let module = self.module;
        let ctx = self.ctx;
        let Some(call) = module.call(name) else {
            return BTreeMap::new();
        };
        let Some(dir) = call
            .source
            .as_deref()
            .and_then(|source| model::module_dir(&self.dir, source))
        else {
            return BTreeMap::new();
        };
        let Some(child_module) = ctx.modules.get(&dir) else {
            return BTreeMap::new();
        };
        if self.stack.len() >= MAX_MODULE_DEPTH || self.stack.contains(&dir) {
            return BTreeMap::new();
        }
        if ctx.instances.get() >= MAX_MODULE_INSTANCES {
            ctx.too_many_instances.set(true);
            return BTreeMap::new();
        }
        ctx.instances.set(ctx.instances.get() + 1);
        let mut inputs = BTreeMap::new();
        let mut count = self.inherited_count.clone();
        for attribute in call.block.body.attributes() {
            let key = attribute.key.as_str();
            let taints = self.eval(&attribute.value, None);
            match key {
                "count" | "for_each" => count.extend(taints),
                "source" | "version" | "providers" | "depends_on" => {}
                _ => {
                    inputs.insert(key.to_string(), taints);
                }
            }
        }
        let mut call_path = self.call_path.clone();
        call_path.push(format!("{}module.{name}", self.prefix));
        let mut stack = self.stack.clone();
        stack.push(dir.clone());
        let mut child = Instance {
            ctx,
            module: child_module,
            prefix: format!("{}module.{name}.", self.prefix),
            dir,
            inputs,
            inherited_count: count,
            call_path,
            stack,
            locals: BTreeMap::new(),
            triggers: BTreeMap::new(),
            children: BTreeMap::new(),
            nesting: self.nesting + 1,
            too_deep: false,
            records: Vec::new(),
            findings: Vec::new(),
        };
        child.run();
        let mut outputs = BTreeMap::new();
        for (output, at) in &child_module.outputs {
            let taints = child.eval(&at.value, None);
            outputs.insert(output.clone(), taints);
        }
        self.too_deep |= child.too_deep;
        self.records.append(&mut child.records);
        self.findings.append(&mut child.findings);
        outputs
    }
}

/// The span of a block's first line (its type keyword).
pub(crate) fn block_span(block: &hcl_edit::structure::Block) -> Option<Range<usize>> {
    block.ident.span().or_else(|| block.span())
}
