//! What a lint run reports: findings with their rule, severity and place, and
//! the report's two renderings (text for people, versioned JSON for scripts and
//! for the platform, which stores it with the template version).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The JSON report's version; a change that breaks readers bumps it.
pub const SCHEMA_VERSION: u32 = 1;

/// How bad a finding is. `Error` findings lose data or break workspaces in
/// ordinary use; `Warning` ones may be intended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// Every rule the lint knows, with its stable id (docs/lint.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Rule {
    /// A persistent resource's identity derives from an input that changes
    /// after creation (owner or workspace name, mutable parameter, template
    /// version): the change replaces it with an empty one.
    #[serde(rename = "persistent-identity-mutable")]
    PersistentIdentityMutable,
    /// A persistent resource is counted by `start_count` or follows the
    /// transition: every stop deletes it.
    #[serde(rename = "persistent-deleted-at-stop")]
    PersistentDeletedAtStop,
    /// A persistent resource that no `abode_protect` names.
    #[serde(rename = "persistent-unprotected")]
    PersistentUnprotected,
    /// An `abode_protect` whose target every stop deletes: every stop is held.
    #[serde(rename = "protect-target-deleted-at-stop")]
    ProtectTargetDeletedAtStop,
    /// An `abode_protect` whose `resource_id` names no managed resource.
    #[serde(rename = "protect-target-unknown")]
    ProtectTargetUnknown,
    /// `ignore_changes` covering what carries the agent's token or script.
    #[serde(rename = "agent-ignore-changes")]
    AgentIgnoreChanges,
    /// The agent token in a command line.
    #[serde(rename = "agent-token-on-command-line")]
    AgentTokenOnCommandLine,
}

impl Rule {
    pub const ALL: [Rule; 7] = [
        Rule::PersistentIdentityMutable,
        Rule::PersistentDeletedAtStop,
        Rule::PersistentUnprotected,
        Rule::ProtectTargetDeletedAtStop,
        Rule::ProtectTargetUnknown,
        Rule::AgentIgnoreChanges,
        Rule::AgentTokenOnCommandLine,
    ];

    pub fn id(self) -> &'static str {
        match self {
            Rule::PersistentIdentityMutable => "persistent-identity-mutable",
            Rule::PersistentDeletedAtStop => "persistent-deleted-at-stop",
            Rule::PersistentUnprotected => "persistent-unprotected",
            Rule::ProtectTargetDeletedAtStop => "protect-target-deleted-at-stop",
            Rule::ProtectTargetUnknown => "protect-target-unknown",
            Rule::AgentIgnoreChanges => "agent-ignore-changes",
            Rule::AgentTokenOnCommandLine => "agent-token-on-command-line",
        }
    }

    pub fn severity(self) -> Severity {
        match self {
            Rule::PersistentUnprotected | Rule::ProtectTargetUnknown => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// One hazard, at one place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub rule: Rule,
    pub severity: Severity,
    /// The file, relative to the template folder, with `/` separators.
    pub file: String,
    /// One-based line and column (in characters) where the hazard is written.
    pub line: u32,
    pub column: u32,
    /// The resource's address, `module.NAME.` prefixed inside a module.
    pub resource: String,
    /// The attribute at fault, when there is one (`name`, `metadata.name`,
    /// `count`, `lifecycle.ignore_changes`).
    #[serde(default)]
    pub attribute: Option<String>,
    /// Why it loses data or breaks workspaces.
    pub message: String,
    /// How to fix it.
    pub fix: String,
}

/// Every finding of one template folder, in file, line, column order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub errors: usize,
    pub warnings: usize,
    pub findings: Vec<Finding>,
}

impl Report {
    /// The report of these findings: sorted, deduplicated, counted.
    pub fn new(mut findings: Vec<Finding>) -> Report {
        findings.sort_by(|a, b| {
            (&a.file, a.line, a.column, a.rule, &a.resource).cmp(&(
                &b.file,
                b.line,
                b.column,
                b.rule,
                &b.resource,
            ))
        });
        findings.dedup();
        let errors = findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count();
        Report {
            schema_version: SCHEMA_VERSION,
            errors,
            warnings: findings.len() - errors,
            findings,
        }
    }

    pub fn has_errors(&self) -> bool {
        self.errors > 0
    }

    /// The summary line: `2 errors, 1 warning` or `no findings`.
    pub fn summary(&self) -> String {
        summary(self.errors, self.warnings)
    }
}

/// `2 errors, 1 warning`, `1 warning`, or `no findings`.
pub fn summary(errors: usize, warnings: usize) -> String {
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    match (errors, warnings) {
        (0, 0) => "no findings".to_string(),
        (e, 0) => plural(e, "error"),
        (0, w) => plural(w, "warning"),
        (e, w) => format!("{}, {}", plural(e, "error"), plural(w, "warning")),
    }
}

impl fmt::Display for Finding {
    /// Three lines: where and what, why, how to fix.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {} {}: {}",
            self.file, self.line, self.column, self.severity, self.rule, self.resource
        )?;
        if let Some(attribute) = &self.attribute {
            write!(f, " ({attribute})")?;
        }
        write!(f, "\n  why: {}\n  fix: {}", self.message, self.fix)
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for finding in &self.findings {
            writeln!(f, "{finding}")?;
        }
        write!(f, "{}", self.summary())
    }
}
