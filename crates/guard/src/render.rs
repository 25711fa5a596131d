//! The human-readable report, written to read like Terraform's own plan output
//! (`-/+`, `# forces replacement`) so operators recognise it at a glance.

use crate::decision::{
    Action, BuildIntent, ClaimReplacement, Decision, Initiator, ProtectedChange, Report,
};
use std::fmt::Write;

struct Style {
    color: bool,
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
    fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }
    fn red(&self, text: &str) -> String {
        self.paint("31", text)
    }
    fn green(&self, text: &str) -> String {
        self.paint("32", text)
    }
    fn yellow(&self, text: &str) -> String {
        self.paint("33", text)
    }
}

fn symbol(style: &Style, action: Action) -> String {
    match action {
        Action::Replace => format!("{}/{}", style.red("-"), style.green("+")),
        Action::ReplaceCreateBeforeDestroy => format!("{}/{}", style.green("+"), style.red("-")),
        Action::Delete | Action::Unknown => format!("  {}", style.red("-")),
        Action::Create => format!("  {}", style.green("+")),
        _ => format!("  {}", style.yellow("~")),
    }
}

fn headline(change: &ProtectedChange) -> &'static str {
    match (change.action, &change.deposed) {
        (_, Some(_)) => "will lose its deposed object",
        (Action::Replace | Action::ReplaceCreateBeforeDestroy, _) => "must be replaced",
        (Action::Create, _) => "will be created again, empty",
        _ => "will be destroyed",
    }
}

/// Renders the report as text; `color` adds ANSI colours (callers pass `true`
/// only when writing to a terminal).
pub fn render_text(report: &Report, color: bool) -> String {
    let style = Style { color };
    let mut out = String::new();
    let verdict = match report.decision {
        Decision::Allow => style.green("allowed"),
        Decision::Confirm => style.yellow("CONFIRMATION REQUIRED"),
        Decision::Block => style.red("BLOCKED"),
    };
    let by_system = report.initiator == Initiator::System;
    let started_by = if by_system {
        " (started by the system)"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "{} {} build{started_by}: {verdict}",
        style.bold("Abode plan guard:"),
        report.transition
    );
    if by_system && report.transition == BuildIntent::Delete {
        let _ = writeln!(
            out,
            "A delete the system started (not a person's) destroys no protected resource without a person: its rules hold the delete for a confirmation or block it."
        );
    }

    for change in &report.protected_changes {
        out.push('\n');
        let _ = writeln!(
            out,
            "  {}",
            style.bold(&format!("# {} {}", change.address, headline(change)))
        );
        if let Some(previous) = &change.previous_address {
            let _ = writeln!(out, "  # (moved from {previous})");
        }
        let _ = writeln!(out, "  # {}", change.reason);
        for protection in &change.protected_by {
            let _ = writeln!(
                out,
                "  # protected by {} (mode {})",
                protection.by, protection.mode
            );
        }
        let deposed = change
            .deposed
            .as_ref()
            .map(|d| format!(" (deposed object {d})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{} {}{deposed}",
            symbol(&style, change.action),
            change.address
        );
        for attribute in &change.replace_paths {
            let _ = writeln!(
                out,
                "      {} {} = {} -> {} {}",
                style.yellow("~"),
                attribute.path,
                attribute.before,
                attribute.after,
                style.red("# forces replacement")
            );
        }
        if let Some(drift) = &change.drift {
            if drift.deleted {
                let _ = writeln!(
                    out,
                    "  # deleted outside Terraform since the last build: its data is already gone"
                );
            } else if !drift.attributes.is_empty() {
                let _ = writeln!(out, "  # changed outside Terraform since the last build:");
            }
            for attribute in &drift.attributes {
                let _ = writeln!(
                    out,
                    "      {} {} = {} -> {}",
                    style.yellow("~"),
                    attribute.path,
                    attribute.before,
                    attribute.after
                );
            }
        }
        let _ = writeln!(out, "  # outcome: {}", change.outcome.as_str());
    }

    if !report.claim_replacements.is_empty() {
        out.push('\n');
        let _ = writeln!(
            out,
            "Replaced or deleted on claim (allowed: a prebuilt workspace has never held anyone's data):"
        );
        for change in &report.claim_replacements {
            let _ = writeln!(out, "{}", claim_line_styled(&style, change));
            let _ = writeln!(out, "  # {}", change.reason);
            if change.protected {
                let _ = writeln!(
                    out,
                    "  # protected: outside a claim this would need a confirmation or be blocked"
                );
            }
        }
    }

    if !report.retained.is_empty() {
        out.push('\n');
        let _ = writeln!(
            out,
            "Retained by this delete (forgotten by Terraform, kept by Abode as retained resources):"
        );
        for kept in &report.retained {
            match &kept.deposed {
                Some(deposed) => {
                    let _ = writeln!(
                        out,
                        "  {} {} (deposed object {deposed})",
                        style.green("="),
                        kept.address
                    );
                }
                None => {
                    let _ = writeln!(out, "  {} {}", style.green("="), kept.address);
                }
            }
        }
    }

    if !report.unprotected_destroys.is_empty() {
        out.push('\n');
        let _ = writeln!(out, "Also destroyed by this plan (not protected):");
        for change in &report.unprotected_destroys {
            let _ = writeln!(
                out,
                "{} {} ({})",
                symbol(&style, change.action),
                change.address,
                change.reason
            );
        }
    }

    let s = &report.summary;
    out.push('\n');
    let _ = writeln!(
        out,
        "Plan: {} to add, {} to change, {} to replace, {} to destroy, {} to forget, {} unchanged.",
        s.create, s.update, s.replace, s.delete, s.forget, s.no_op
    );
    if let Some(older) = &report.older_plan_format {
        let _ = writeln!(
            out,
            "{} format_version {} ({}) does not record:",
            style.yellow("Older plan:"),
            older.format_version,
            older.written_by
        );
        for missing in &older.missing {
            let _ = writeln!(out, "  - {}: {}", missing.field, missing.consequence);
        }
    }
    for warning in &report.warnings {
        let _ = writeln!(out, "{} {warning}", style.yellow("Warning:"));
    }
    let protected = report.protected_changes.len();
    let claimed = report.claim_replacements.len();
    let claimed_protected = report
        .claim_replacements
        .iter()
        .filter(|c| c.protected)
        .count();
    let system_delete = by_system && report.transition == BuildIntent::Delete;
    let conclusion = match (report.decision, report.transition) {
        (Decision::Allow, BuildIntent::Claim) if claimed > 0 => format!(
            "Decision: allow. This is a prebuild claim: {claimed} resource(s) of the prebuilt workspace will be replaced or deleted, {claimed_protected} of them protected; no one's data is lost."
        ),
        (Decision::Allow, BuildIntent::Claim) => {
            "Decision: allow. This is a prebuild claim: no resource of the prebuilt workspace is replaced or deleted.".into()
        }
        (Decision::Allow, BuildIntent::Delete) if protected > 0 => format!(
            "Decision: allow. This is a workspace deletion: {protected} protected resource(s) will be destroyed as intended."
        ),
        (Decision::Allow, _) => "Decision: allow. No protected resource is destroyed or replaced.".into(),
        (Decision::Confirm, BuildIntent::Delete) if system_delete => format!(
            "Decision: confirm. The system started this delete, not a person: {protected} protected resource(s) would be destroyed; a person must confirm this exact plan."
        ),
        (Decision::Block, BuildIntent::Delete) if system_delete => format!(
            "Decision: block. The system started this delete, not a person: {protected} protected resource(s) would be destroyed, and a block rule forbids it without a person; a person can delete the workspace, or release the protection."
        ),
        (Decision::Confirm, _) => format!(
            "Decision: confirm. {protected} protected resource(s) would be destroyed, replaced or re-created empty; this exact plan needs an explicit confirmation."
        ),
        (Decision::Block, _) => format!(
            "Decision: block. {protected} protected resource(s) would be destroyed or replaced, and a block rule forbids it; fix the template or release the protection."
        ),
    };
    let _ = writeln!(out, "{}", style.bold(&conclusion));
    out
}

impl ClaimReplacement {
    /// The one line that names the change, as the text report and build logs
    /// print it: `-/+ ADDRESS (replaced on claim: PATH, PATH)`,
    /// `  - ADDRESS (deleted on claim)`. Without colour: build logs and
    /// notifications are not terminals. (Written here, with the report's
    /// other lines, so that the decision names no renderer.)
    pub fn line(&self) -> String {
        claim_line_styled(&Style { color: false }, self)
    }
}

fn claim_line_styled(style: &Style, change: &ClaimReplacement) -> String {
    let what = match change.action {
        Action::Replace | Action::ReplaceCreateBeforeDestroy if change.replace_paths.is_empty() => {
            "replaced on claim".to_string()
        }
        Action::Replace | Action::ReplaceCreateBeforeDestroy => {
            format!("replaced on claim: {}", change.replace_paths.join(", "))
        }
        Action::Create => "created again on claim, empty".to_string(),
        Action::Delete => "deleted on claim".to_string(),
        _ => "destroyed on claim".to_string(),
    };
    format!(
        "{} {} ({what})",
        symbol(style, change.action),
        change.address
    )
}
