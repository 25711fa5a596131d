//! Fleet previews: the answer to "which of my users' disks would this version
//! replace?" before the version is activated. A preview plans a version
//! against every live workspace of its template that is not on it (or the
//! named ones), each with its own state, parameters and transition, and
//! keeps what the guard would decide for a build of it; nothing is applied,
//! no build is recorded, no workspace is held up (the plans run only when no
//! build waits, `provisioner/preview.rs`).
//!
//! Activation (`Templates`, `templates/mod.rs`) reads the latest
//! preview: a version whose preview would hold or block workspaces (or has
//! not finished) is activated only when the request acknowledges it.

use abode_guard::Decision;
use std::sync::Arc;

use abode_store::{page_size, NewPreview, Page, Preview, PreviewResult, Store};

use crate::authz::Action;
use crate::templates::VersionLint;
pub use crate::templates::{activation_concern, PreviewGate};
use crate::{Caller, ControlError, JobQueue, Templates, Workspaces};

/// The most workspaces one preview may name.
pub const MAX_NAMED_WORKSPACES: usize = 1000;

/// A preview with one page of its results.
#[derive(Debug, Clone)]
pub struct PreviewReport {
    pub preview: Preview,
    pub results: Page<PreviewEntry>,
}

/// One workspace's result, its stored names parsed.
#[derive(Debug, Clone)]
pub struct PreviewEntry {
    pub result: PreviewResult,
    pub decision: Option<Decision>,
    /// The guard's report (`abode plan check --format json`'s schema).
    pub report: Option<serde_json::Value>,
    /// The lint's findings on the resources this plan destroys or replaces
    /// under protection: the hazard in the HCL behind the change.
    pub lint: Vec<LintLink>,
}

/// A protected change whose resource the lint flagged.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LintLink {
    /// The change's address, as the plan names it.
    pub address: String,
    /// The lint rule's id.
    pub rule: String,
    /// The attribute the finding is about, when it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribute: Option<String>,
}

/// Fleet previews; cheap to clone.
#[derive(Clone)]
pub struct Previews {
    inner: Arc<PreviewsParts>,
}

/// What [`Previews`] holds.
pub(crate) struct PreviewsParts {
    pub(crate) store: Store,
    pub(crate) templates: Arc<Templates>,
    pub(crate) workspaces: Workspaces,
    pub(crate) jobs: JobQueue,
}

impl Previews {
    pub(crate) fn new(parts: PreviewsParts) -> Previews {
        Previews {
            inner: Arc::new(parts),
        }
    }

    fn templates(&self) -> &Templates {
        &self.inner.templates
    }

    fn workspaces(&self) -> &Workspaces {
        &self.inner.workspaces
    }

    fn jobs(&self) -> &JobQueue {
        &self.inner.jobs
    }

    /// Starts a preview of version `number` of template `name`: of the named
    /// workspaces (`name` or `owner/name`), or of every live workspace of
    /// the template not on that version.
    pub async fn start(
        &self,
        caller: &Caller,
        name: &str,
        number: i64,
        workspaces: &[String],
    ) -> Result<Preview, ControlError> {
        self.templates()
            .template_for(caller, name, Action::TemplatePreview)
            .await?;
        if workspaces.len() > MAX_NAMED_WORKSPACES {
            return Err(ControlError::BadRequest(format!(
                "a preview names at most {MAX_NAMED_WORKSPACES} workspaces; name none to preview them all"
            )));
        }
        let (template, version) = self.templates().version_of(name, number).await?;
        if !version.validation_ok {
            return Err(ControlError::Conflict(format!(
                "version {number} of template \"{name}\" did not pass validation: {}",
                version.validation_message
            )));
        }
        let workspace_ids = if workspaces.is_empty() {
            None
        } else {
            let mut ids = Vec::with_capacity(workspaces.len());
            for reference in workspaces {
                let workspace = self
                    .workspaces()
                    .resolve(caller, reference, Action::WorkspaceRead)
                    .await?;
                if workspace.deleted || workspace.template_id != template.id {
                    return Err(ControlError::BadRequest(format!(
                        "workspace \"{reference}\" is not a live workspace of template \"{name}\""
                    )));
                }
                ids.push(workspace.id);
            }
            Some(ids)
        };
        let preview = self
            .inner
            .store
            .create_preview(&NewPreview {
                id: abode_store::new_id(),
                template_id: template.id.clone(),
                template_version_id: version.id.clone(),
                requested_by: caller.user.id.clone(),
                workspace_ids,
            })
            .await?;
        let (id, total) = (&preview.id, preview.total);
        let details = Some(format!("version={number} preview={id} workspaces={total}"));
        self.templates()
            .audit_template(caller, "template.preview", name, "success", details)
            .await;
        // Every idle worker may take a plan.
        self.jobs().wake_all();
        self.jobs().queued().await;
        Ok(preview)
    }

    /// The latest preview of version `number` with one page of its results
    /// (`None`: the version was never previewed).
    pub async fn report(
        &self,
        caller: &Caller,
        name: &str,
        number: i64,
        after: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Option<PreviewReport>, ControlError> {
        self.templates()
            .template_for(caller, name, Action::TemplatePreview)
            .await?;
        let (_, version) = self.templates().version_of(name, number).await?;
        let Some(preview) = self.inner.store.latest_preview(&version.id, false).await? else {
            return Ok(None);
        };
        let page = self
            .inner
            .store
            .list_preview_result_page(&preview.id, after, page_size(limit))
            .await?;
        let lint = self.templates().stored_lint(&version).await?;
        let items = page
            .items
            .into_iter()
            .map(|result| entry(result, lint.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(PreviewReport {
            preview,
            results: Page {
                items,
                next: page.next,
            },
        }))
    }

    /// The latest preview of the whole fleet of a version, as activation
    /// weighs it (`None`: never previewed; a preview of named workspaces
    /// does not stand for the fleet). Read by anyone who may read
    /// templates: the counts name no workspace.
    pub async fn gate(
        &self,
        caller: &Caller,
        name: &str,
        number: i64,
    ) -> Result<Option<PreviewGate>, ControlError> {
        self.templates()
            .template_for(caller, name, Action::TemplateRead)
            .await?;
        let (template, version) = self.templates().version_of(name, number).await?;
        self.templates()
            .activation_gate(&template.id, &version.archive_sha256)
            .await
    }
}

/// A stored result with its names parsed (an unknown decision is an error,
/// not a guess) and the lint's findings on its protected changes.
fn entry(result: PreviewResult, lint: Option<&VersionLint>) -> Result<PreviewEntry, ControlError> {
    let decision = result
        .decision
        .as_deref()
        .map(|name| {
            Decision::parse(name).ok_or_else(|| {
                ControlError::Internal(format!("a preview result has an unknown decision `{name}`"))
            })
        })
        .transpose()?;
    let report: Option<serde_json::Value> = result
        .report
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .map_err(|error| {
            ControlError::Internal(format!("a preview's report is unreadable: {error}"))
        })?;
    let lint = match (&report, lint) {
        (Some(report), Some(lint)) => lint_links(report, lint),
        _ => Vec::new(),
    };
    Ok(PreviewEntry {
        result,
        decision,
        report,
        lint,
    })
}

/// The lint findings on the resources of a report's protected changes: a
/// change at `module.a[0].abode_volume.home[1]` matches a finding on
/// `module.a.abode_volume.home` (the lint reads the HCL, which has no
/// instance keys).
fn lint_links(report: &serde_json::Value, lint: &VersionLint) -> Vec<LintLink> {
    let Some(changes) = report
        .get("protected_changes")
        .and_then(|changes| changes.as_array())
    else {
        return Vec::new();
    };
    let mut links = Vec::new();
    for change in changes {
        let Some(address) = change.get("address").and_then(|address| address.as_str()) else {
            continue;
        };
        let resource = without_instance_keys(address);
        for finding in &lint.report.findings {
            if finding.resource == resource {
                links.push(LintLink {
                    address: address.to_string(),
                    rule: finding.rule.id().to_string(),
                    attribute: finding.attribute.clone(),
                });
            }
        }
    }
    links
}

/// An address without its `[...]` instance keys (which may hold dots and
/// brackets inside quotes).
fn without_instance_keys(address: &str) -> String {
    let mut out = String::with_capacity(address.len());
    let mut depth = 0usize;
    let mut quoted = false;
    let mut escaped = false;
    for c in address.chars() {
        if depth > 0 {
            match (quoted, escaped, c) {
                (true, true, _) => escaped = false,
                (true, false, '\\') => escaped = true,
                (_, false, '"') => quoted = !quoted,
                (false, _, '[') => depth += 1,
                (false, _, ']') => depth -= 1,
                _ => {}
            }
            continue;
        }
        if c == '[' {
            depth = 1;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn instance_keys_are_dropped_from_addresses() {
        let cases = [
            ("abode_volume.home", "abode_volume.home"),
            ("abode_volume.home[0]", "abode_volume.home"),
            (
                r#"module.disks["a.b]"].abode_volume.home["x\"]["]"#,
                "module.disks.abode_volume.home",
            ),
            ("module.a[1].module.b[2].c.d", "module.a.module.b.c.d"),
        ];
        for (address, expected) in cases {
            assert_eq!(without_instance_keys(address), expected, "{address}");
        }
    }
}
