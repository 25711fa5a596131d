//! What a build's work dir says about resources the template does not: a
//! workspace delete that retains some of them, and a build that adopts
//! retained ones.
//!
//! Terraform's `-destroy` mode ignores `removed` blocks, and a `removed`
//! block may not name a resource the configuration still declares. So a
//! delete that retains is planned in normal mode over the template's
//! settings alone (its `terraform`, `provider` and `variable` blocks, and
//! the locals those can use), with a `removed { lifecycle { destroy = false
//! } }` block for each retained resource: every other resource of the state
//! is planned for deletion (it has no configuration any more), and each
//! retained one is forgotten. An adopting build imports each retained
//! resource with an `import` block at its address. Both files are written
//! by Abode into that build's work dir only; the template version is never
//! changed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use hcl_edit::expr::{Expression, TraversalOperator};
use hcl_edit::structure::{Body, Structure};
use hcl_edit::visit::{self, Visit};
use serde::{Deserialize, Serialize};

/// The file holding the `removed` blocks of a delete that retains.
pub const FORGET_FILE: &str = "abode_retain.tf";

/// The file holding the `import` blocks of a build that adopts.
pub const IMPORT_FILE: &str = "abode_adopt.tf";

/// Blocks a delete's configuration keeps: what Terraform needs to reach the
/// providers and the state, nothing that declares a resource.
const KEPT_BLOCKS: [&str; 3] = ["terraform", "provider", "variable"];

/// Roots a kept local may refer to.
const SETTINGS_ROOTS: [&str; 4] = ["var", "local", "path", "terraform"];

/// A retained resource brought into a workspace at `address`, found by
/// `id` (its provider's import id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportTarget {
    pub address: String,
    pub id: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RetentionError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the template's {file} cannot be read for a delete that retains: {message}")]
    Parse { file: String, message: String },
    #[error("`{0}` is not a resource address Abode writes into a configuration")]
    Address(String),
}

/// Rewrites the template's root module in `template_dir` into the
/// configuration of a delete that forgets the resources of `forget`
/// (instance addresses: each names its whole resource, as Terraform's
/// `removed` blocks do).
pub fn write_forgetting_config(
    template_dir: &Path,
    forget: &[String],
) -> Result<(), RetentionError> {
    let mut resources = BTreeSet::new();
    for address in forget {
        resources.insert(resource_address(address)?);
    }
    let mut files = Vec::new();
    let entries = std::fs::read_dir(template_dir).map_err(|source| RetentionError::Read {
        path: template_dir.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| RetentionError::Read {
            path: template_dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !path.is_file() {
            continue;
        }
        if name.ends_with(".tf") {
            let text = read(&path)?;
            let body =
                hcl_edit::parser::parse_body(&text).map_err(|error| RetentionError::Parse {
                    file: name.clone(),
                    message: error
                        .to_string()
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                })?;
            files.push(TemplateFile::Hcl { path, body });
        } else if name.ends_with(".tf.json") {
            let text = read(&path)?;
            let value: serde_json::Value =
                serde_json::from_str(&text).map_err(|error| RetentionError::Parse {
                    file: name.clone(),
                    message: error.to_string(),
                })?;
            files.push(TemplateFile::Json { path, value });
        }
    }
    let kept_locals = settings_locals(&files);
    for file in files {
        match file {
            TemplateFile::Hcl { path, body } => {
                write(&path, &settings_only(body, &kept_locals).to_string())?;
            }
            TemplateFile::Json { path, mut value } => {
                if let Some(object) = value.as_object_mut() {
                    object.retain(|key, _| KEPT_BLOCKS.contains(&key.as_str()));
                }
                write(&path, &value.to_string())?;
            }
        }
    }
    let mut removed = String::from("# Written by Abode for a workspace delete that retains.\n");
    for resource in &resources {
        removed.push_str(&format!(
            "removed {{\n  from = {resource}\n  lifecycle {{\n    destroy = false\n  }}\n}}\n"
        ));
    }
    write(&template_dir.join(FORGET_FILE), &removed)
}

/// Writes an `import` block for each target into `template_dir`.
pub fn write_imports(template_dir: &Path, imports: &[ImportTarget]) -> Result<(), RetentionError> {
    let mut text = String::from("# Written by Abode for a build that adopts retained resources.\n");
    for target in imports {
        check_address(&target.address)?;
        text.push_str(&format!(
            "import {{\n  to = {}\n  id = {}\n}}\n",
            target.address,
            hcl_string(&target.id)
        ));
    }
    write(&template_dir.join(IMPORT_FILE), &text)
}

enum TemplateFile {
    Hcl {
        path: PathBuf,
        body: Body,
    },
    Json {
        path: PathBuf,
        value: serde_json::Value,
    },
}

/// The template's settings: only the blocks a delete keeps, and only the
/// locals those may use.
fn settings_only(body: Body, kept_locals: &BTreeSet<String>) -> Body {
    let mut out = Body::builder();
    for structure in body.into_iter() {
        let Structure::Block(mut block) = structure else {
            continue;
        };
        let ident = block.ident.as_str().to_string();
        if KEPT_BLOCKS.contains(&ident.as_str()) {
            out = out.block(block);
        } else if ident == "locals" {
            let attributes: Vec<Structure> = std::mem::take(&mut block.body)
                .into_iter()
                .filter(|s| {
                    matches!(s, Structure::Attribute(a) if kept_locals.contains(a.key.as_str()))
                })
                .collect();
            if !attributes.is_empty() {
                let mut inner = Body::builder();
                for attribute in attributes {
                    if let Structure::Attribute(attribute) = attribute {
                        inner = inner.attribute(attribute);
                    }
                }
                block.body = inner.build();
                out = out.block(block);
            }
        }
    }
    out.build()
}

/// The locals that refer only to variables, paths and other such locals.
fn settings_locals(files: &[TemplateFile]) -> BTreeSet<String> {
    let mut locals: BTreeMap<String, Vec<(String, Option<String>)>> = BTreeMap::new();
    for file in files {
        let TemplateFile::Hcl { body, .. } = file else {
            continue;
        };
        for block in body.get_blocks("locals") {
            for attribute in block.body.attributes() {
                let mut collector = Roots::default();
                collector.visit_expr(&attribute.value);
                locals.insert(attribute.key.as_str().to_string(), collector.roots);
            }
        }
    }
    let mut kept: BTreeSet<String> = locals.keys().cloned().collect();
    loop {
        let before = kept.len();
        let snapshot = kept.clone();
        kept.retain(|name| {
            locals.get(name).is_some_and(|roots| {
                roots.iter().all(|(root, first)| {
                    SETTINGS_ROOTS.contains(&root.as_str())
                        && (root != "local" || first.as_ref().is_some_and(|l| snapshot.contains(l)))
                })
            })
        });
        if kept.len() == before {
            return kept;
        }
    }
}

/// The root (and first attribute) of every reference an expression makes.
#[derive(Default)]
struct Roots {
    roots: Vec<(String, Option<String>)>,
}

impl Visit for Roots {
    fn visit_traversal(&mut self, node: &hcl_edit::expr::Traversal) {
        match &node.expr {
            Expression::Variable(root) => {
                let first = node.operators.first().and_then(|op| match op.value() {
                    TraversalOperator::GetAttr(name) => Some(name.as_str().to_string()),
                    _ => None,
                });
                self.roots.push((root.as_str().to_string(), first));
                for operator in &node.operators {
                    if let TraversalOperator::Index(index) = operator.value() {
                        self.visit_expr(index);
                    }
                }
            }
            _ => visit::visit_traversal(self, node),
        }
    }
}

/// `module.a["x"].t.n[0]` → `module.a.t.n`.
fn resource_address(address: &str) -> Result<String, RetentionError> {
    check_address(address)?;
    let mut out = String::new();
    let mut depth = 0usize;
    let mut in_string = false;
    for c in address.chars() {
        match (c, in_string) {
            ('"', _) if depth > 0 => in_string = !in_string,
            ('[', false) => depth += 1,
            (']', false) => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    Ok(out)
}

/// An address Abode writes unquoted into a configuration: names, dots and
/// instance keys of plain characters only.
fn check_address(address: &str) -> Result<(), RetentionError> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let mut in_key = false;
    let mut in_string = false;
    for c in address.chars() {
        let ok = match (c, in_key, in_string) {
            ('[', false, _) => {
                in_key = true;
                true
            }
            (']', true, false) => {
                in_key = false;
                true
            }
            ('"', true, _) => {
                in_string = !in_string;
                true
            }
            (c, _, _) => plain(c) || (in_string && c == ' '),
        };
        if !ok {
            return Err(RetentionError::Address(address.to_string()));
        }
    }
    if address.is_empty() || in_key || in_string || !address.contains('.') {
        return Err(RetentionError::Address(address.to_string()));
    }
    Ok(())
}

/// A quoted HCL string holding `text` literally (no template sequences).
fn hcl_string(text: &str) -> String {
    let json = serde_json::Value::String(text.to_string()).to_string();
    json.replace("${", "$${").replace("%{", "%%{")
}

fn read(path: &Path) -> Result<String, RetentionError> {
    std::fs::read_to_string(path).map_err(|source| RetentionError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn write(path: &Path, text: &str) -> Result<(), RetentionError> {
    std::fs::write(path, text).map_err(|source| RetentionError::Write {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn resource_addresses_drop_instance_keys() {
        for (input, expected) in [
            ("abode_volume.home", Some("abode_volume.home")),
            ("abode_volume.home[0]", Some("abode_volume.home")),
            (
                "module.m[\"a b\"].abode_volume.home[\"x\"]",
                Some("module.m.abode_volume.home"),
            ),
            ("abode_volume.home\n}", None),
            ("x", None),
            ("a.b[\"${x}\"]", None),
            ("a.b[", None),
        ] {
            assert_eq!(
                resource_address(input).ok().as_deref(),
                expected,
                "{input:?}"
            );
        }
    }

    #[test]
    fn import_ids_are_literal_strings() {
        assert_eq!(hcl_string("home-1"), "\"home-1\"");
        assert_eq!(hcl_string("a\"${b}%{c}\n"), "\"a\\\"$${b}%%{c}\\n\"");
    }

    #[test]
    fn a_forgetting_config_keeps_settings_and_forgets_retained_resources() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("main.tf"),
            r#"
terraform {
  required_providers {
    abode = { source = "abode/abode" }
  }
}
variable "region" { default = "x" }
locals {
  region = var.region
  home   = abode_volume.home.path
  both   = "${local.region}-${local.home}"
}
provider "abode" {}
data "abode_workspace" "me" {}
resource "abode_volume" "home" { name = "home-${data.abode_workspace.me.id}" }
resource "abode_protect" "home" { resource_id = abode_volume.home.id }
output "path" { value = abode_volume.home.path }
moved {
  from = abode_volume.old
  to   = abode_volume.home
}
"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("extra.tf.json"),
            r#"{"variable":{"a":{}},"resource":{"abode_volume":{"b":{"name":"b"}}}}"#,
        )
        .unwrap();
        write_forgetting_config(dir.path(), &["abode_volume.home".into()]).unwrap();
        let main = std::fs::read_to_string(dir.path().join("main.tf")).unwrap();
        for kept in [
            "required_providers",
            "variable \"region\"",
            "region = var.region",
            "provider \"abode\"",
        ] {
            assert!(main.contains(kept), "{kept} missing from:\n{main}");
        }
        for dropped in ["resource", "data", "output", "moved", "home   =", "both"] {
            assert!(!main.contains(dropped), "{dropped} left in:\n{main}");
        }
        let json = std::fs::read_to_string(dir.path().join("extra.tf.json")).unwrap();
        assert_eq!(json, r#"{"variable":{"a":{}}}"#);
        let removed = std::fs::read_to_string(dir.path().join(FORGET_FILE)).unwrap();
        assert!(removed.contains("from = abode_volume.home\n"), "{removed}");
        assert!(removed.contains("destroy = false"), "{removed}");
    }
}
