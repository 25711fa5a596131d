//! Abode's template lint: the persistence hazards a template's HCL shows
//! before any workspace builds it.
//!
//! The guard judges one build's plan at the moment of the build; a template
//! admin wants to know before pushing that a volume is named after its owner
//! (renaming the owner replaces it), counted by `start_count` (every stop
//! deletes it), left unprotected, or that the agent's token ends up on a
//! command line. The lint reads the `.tf` files (with `hcl-edit`, which keeps
//! spans, so each finding has its `file:line:column`), follows references
//! through locals, variables, local modules and outputs, and reports each
//! hazard with its rule, severity, resource, why and how to fix it.
//!
//! Pure apart from [`lint_dir`] reading the folder: no network, no processes,
//! no clock. Anything it cannot read becomes a [`LintError`] with a one-line
//! message, never a panic. The rules and the JSON schema are in docs/lint.md.
//!
//! # Modules
//!
//! `source.rs` reads the folder (bounded, no links, no hidden folders) and
//! parses with `hcl-edit`, whose byte spans become each finding's
//! `file:line:column`; `model.rs` gathers a module folder's resources,
//! `abode_parameter`s, locals, outputs and module calls; `taint.rs` collects an
//! expression's references and names the inputs that matter (owner and
//! workspace names, mutable parameters, the template version, the transition,
//! the agent's token and script, managed resources); `analysis.rs` walks the
//! root module and every local module call once with its inputs, resolving
//! `local.`, `var.`, `module.`, `each`/`count` and `random_*` keepers;
//! `rules.rs` holds the rules, per resource and over the whole template (what
//! `abode_protect` covers); `persistent.rs` the persistent types and their
//! identity attributes (extendable with `--persistent-type`); `finding.rs` the
//! report (text, JSON `schema_version` 1).
//!
//! Its fixtures (`tests/fixtures/<case>/`: the `.tf` files and `expected.txt`,
//! `UPDATE_EXPECT=1` to refresh) show each rule firing and not firing.

mod analysis;
mod error;
mod finding;
mod model;
mod persistent;
mod rules;
mod source;
mod taint;

use std::collections::BTreeSet;
use std::path::Path;

use hcl_edit::Span;

pub use error::LintError;
pub use finding::{summary, Finding, Report, Rule, Severity, SCHEMA_VERSION};
pub use persistent::PersistentTypes;
pub use source::{read_dir, SourceFile, MAX_FILES, MAX_TOTAL_BYTES};

use analysis::{Context, Instance};
use source::Parsed;

/// What a lint run knows beyond the files.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub persistent_types: PersistentTypes,
}

/// Lints the `.tf` files under `dir` (local modules included).
pub fn lint_dir(dir: &Path, options: &Options) -> Result<Report, LintError> {
    lint_files(&read_dir(dir)?, options)
}

/// Lints a template given as its files (paths relative to the template's
/// folder). The root module is the files at the top; local modules are
/// followed through their `source = "./..."`. Files in other folders are not
/// read, so a broken file nothing calls does not stop the lint.
pub fn lint_files(files: &[SourceFile], options: &Options) -> Result<Report, LintError> {
    let parsed = parse_reachable(files)?;
    let context = Context::new(&parsed, &options.persistent_types, rules::check_resource);
    let Some(root_module) = context.modules.get("") else {
        return Ok(Report::new(Vec::new()));
    };
    let mut root = Instance::root(&context, root_module);
    root.run();
    if root.too_deep {
        return Err(LintError::TooDeep(analysis::MAX_REFERENCE_DEPTH));
    }
    if context.too_many_instances.get() {
        return Err(LintError::TooManyModules(analysis::MAX_MODULE_INSTANCES));
    }
    let mut findings = rules::check_template(&context, &root.records);
    findings.append(&mut root.findings);
    Ok(Report::new(findings))
}

/// Parses the root folder's `.tf` files, then those of every local module
/// folder they (transitively) call.
fn parse_reachable(files: &[SourceFile]) -> Result<Vec<Parsed>, LintError> {
    let mut parsed = Vec::new();
    let mut seen = BTreeSet::from([String::new()]);
    let mut queue = vec![String::new()];
    while let Some(dir) = queue.pop() {
        for file in files
            .iter()
            .filter(|f| f.path.ends_with(".tf") && f.dir() == dir)
        {
            let file = Parsed::parse(file)?;
            for block in file.body.blocks().filter(|b| b.ident.as_str() == "module") {
                let source = block
                    .body
                    .get_attribute("source")
                    .and_then(|a| model::literal_string(&a.value));
                if let Some(child) = source.and_then(|s| model::module_dir(&dir, &s)) {
                    if seen.insert(child.clone()) {
                        queue.push(child);
                    }
                }
            }
            parsed.push(file);
        }
    }
    Ok(parsed)
}

/// Where a template declares its own state backend: a `backend` or `cloud`
/// block inside a `terraform` block of a root-module file. Abode is every
/// build's state backend (its lock is what keeps one Terraform per
/// workspace), so the server refuses such a template at push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredBackend {
    pub file: String,
    pub line: u32,
    pub column: u32,
    /// `backend "s3"`, `cloud`.
    pub what: String,
}

/// The first backend a template's root module declares (see
/// [`DeclaredBackend`]); files that do not parse are the lint's and
/// Terraform's to report.
pub fn declared_backend(files: &[SourceFile]) -> Option<DeclaredBackend> {
    files
        .iter()
        .filter(|file| file.dir().is_empty())
        .filter_map(|file| source::Parsed::parse(file).ok())
        .find_map(|parsed| {
            parsed
                .body
                .blocks()
                .filter(|block| block.ident.as_str() == "terraform")
                .flat_map(|block| block.body.blocks())
                .find_map(|inner| {
                    let what = match inner.ident.as_str() {
                        "backend" => format!(
                            "backend \"{}\"",
                            inner
                                .labels
                                .first()
                                .map(|label| label.as_str().to_string())
                                .unwrap_or_default()
                        ),
                        "cloud" => "cloud".to_string(),
                        _ => return None,
                    };
                    let (line, column) = parsed.position(inner.ident.span());
                    Some(DeclaredBackend {
                        file: parsed.path.clone(),
                        line,
                        column,
                        what,
                    })
                })
        })
}

#[cfg(test)]
mod backend_tests {
    use super::*;

    /// Files (path, text) and the backend expected (`file:line:column what`).
    type Case = (
        &'static [(&'static str, &'static str)],
        Option<&'static str>,
    );

    #[test]
    fn a_root_module_backend_or_cloud_block_is_found_with_its_position() {
        let cases: &[Case] = &[
            (&[("main.tf", "resource \"a\" \"b\" {}\n")], None),
            (
                &[("main.tf", "terraform {\n  required_version = \">= 1\"\n}\n")],
                None,
            ),
            (
                &[(
                    "main.tf",
                    "terraform {\n  backend \"s3\" {\n    bucket = \"x\"\n  }\n}\n",
                )],
                Some("main.tf:2:3 backend \"s3\""),
            ),
            (
                &[
                    ("b.tf", "terraform {\n cloud {}\n}\n"),
                    ("a.tf", "locals {}\n"),
                ],
                Some("b.tf:2:2 cloud"),
            ),
            // A module's backend is ignored by Terraform, and by us.
            (
                &[(
                    "modules/disk/main.tf",
                    "terraform {\n  backend \"local\" {}\n}\n",
                )],
                None,
            ),
            // Broken files are for the lint and Terraform to report.
            (&[("main.tf", "terraform {\n  backend \"s3\" {\n")], None),
        ];
        for (files, expected) in cases {
            let files: Vec<SourceFile> = files
                .iter()
                .map(|(path, text)| SourceFile::new(*path, *text))
                .collect();
            let found = declared_backend(&files)
                .map(|b| format!("{}:{}:{} {}", b.file, b.line, b.column, b.what));
            assert_eq!(found.as_deref(), *expected, "{files:?}");
        }
    }
}
