//! The declarations the rules need, gathered per module folder from the parsed
//! files: managed resources, `abode_parameter` data sources, locals, outputs
//! and module calls. Everything borrows from the parsed bodies, so a finding
//! can point back at the exact attribute.

use std::collections::BTreeMap;

use hcl_edit::expr::Expression;
use hcl_edit::structure::{Attribute, Block, Body};

use crate::source::Parsed;

pub(crate) struct Resource<'a> {
    pub kind: String,
    pub name: String,
    pub file: usize,
    pub block: &'a Block,
}

pub(crate) struct Call<'a> {
    pub name: String,
    pub block: &'a Block,
    /// `source`, when it is a plain string.
    pub source: Option<String>,
}

/// One module folder's declarations.
#[derive(Default)]
pub(crate) struct Module<'a> {
    pub resources: Vec<Resource<'a>>,
    /// Index into `resources` by `(type, name)`: references are resolved
    /// for every attribute, so this lookup must not scan.
    by_address: BTreeMap<(String, String), usize>,
    /// `abode_parameter` data sources by label: whether they are mutable.
    pub parameters: BTreeMap<String, bool>,
    pub locals: BTreeMap<String, &'a Attribute>,
    pub outputs: BTreeMap<String, &'a Attribute>,
    pub calls: Vec<Call<'a>>,
}

impl<'a> Module<'a> {
    /// Gathers the declarations of the files in folder `dir`.
    pub(crate) fn gather(files: &'a [Parsed], dir: &str) -> Module<'a> {
        let mut module = Module::default();
        for (file, parsed) in files.iter().enumerate() {
            if parsed.dir != dir {
                continue;
            }
            for block in parsed.body.blocks() {
                module.add(file, block);
            }
        }
        module
    }

    fn add(&mut self, file: usize, block: &'a Block) {
        let labels: Vec<&str> = block.labels.iter().map(|l| l.as_str()).collect();
        match (block.ident.as_str(), labels.as_slice()) {
            ("resource", [kind, name]) => {
                self.by_address
                    .entry(((*kind).to_string(), (*name).to_string()))
                    .or_insert(self.resources.len());
                self.resources.push(Resource {
                    kind: (*kind).to_string(),
                    name: (*name).to_string(),
                    file,
                    block,
                });
            }
            ("data", ["abode_parameter", name]) => {
                let flag = |key: &str| block.body.get_attribute(key).map(|a| &a.value);
                // Anything but an absent or literal `false` flag may be true.
                let maybe_true = |e: Option<&Expression>| {
                    e.is_some_and(|e| !matches!(e, Expression::Bool(b) if !*b.value()))
                };
                let mutable = maybe_true(flag("mutable")) || maybe_true(flag("ephemeral"));
                self.parameters.insert((*name).to_string(), mutable);
            }
            ("locals", []) => {
                for attribute in block.body.attributes() {
                    self.locals
                        .insert(attribute.key.as_str().to_string(), attribute);
                }
            }
            ("output", [name]) => {
                if let Some(value) = block.body.get_attribute("value") {
                    self.outputs.insert((*name).to_string(), value);
                }
            }
            ("module", [name]) => self.calls.push(Call {
                name: (*name).to_string(),
                block,
                source: block
                    .body
                    .get_attribute("source")
                    .and_then(|a| literal_string(&a.value)),
            }),
            _ => {}
        }
    }

    pub(crate) fn resource(&self, kind: &str, name: &str) -> Option<&Resource<'a>> {
        self.by_address
            .get(&(kind.to_string(), name.to_string()))
            .and_then(|&index| self.resources.get(index))
    }

    pub(crate) fn call(&self, name: &str) -> Option<&Call<'a>> {
        self.calls.iter().find(|c| c.name == name)
    }
}

/// The value of a string literal or a template without interpolations.
pub(crate) fn literal_string(expression: &Expression) -> Option<String> {
    match expression {
        Expression::String(s) => Some(s.value().to_string()),
        Expression::StringTemplate(t) => {
            let mut out = String::new();
            for element in t.iter() {
                match element {
                    hcl_edit::template::Element::Literal(l) => out.push_str(l.value()),
                    _ => return None,
                }
            }
            Some(out)
        }
        _ => None,
    }
}

/// The folder a local module `source` names, relative to the template root,
/// or `None` for a registry or remote module or a path leaving the template.
pub(crate) fn module_dir(parent: &str, source: &str) -> Option<String> {
    if !(source.starts_with("./") || source.starts_with("../")) {
        return None;
    }
    let mut parts: Vec<&str> = parent.split('/').filter(|p| !p.is_empty()).collect();
    for part in source.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(parts.join("/"))
}

/// The attributes at a dotted path through nested blocks (`metadata.name`):
/// every match, since a block may repeat.
pub(crate) fn attributes_at<'a>(body: &'a Body, path: &str) -> Vec<&'a Attribute> {
    match path.split_once('.') {
        None => body.get_attribute(path).into_iter().collect(),
        Some((block, rest)) => body
            .blocks()
            .filter(|b| b.ident.as_str() == block)
            .flat_map(|b| attributes_at(&b.body, rest))
            .collect(),
    }
}
