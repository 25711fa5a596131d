//! Fleet previews: the answer to "which of my users' disks would this version
//! replace?" before the version is activated. A preview plans a version
//! against every live workspace of its template that is not on it (or the
//! named ones), each with its own state, parameters and transition, and
//! keeps what the guard would decide for a build of it; nothing is applied,
//! no build is recorded, no workspace is held up (the plans run only when no
//! build waits, `provisioner/preview.rs`).
//!
//! Activation reads the latest preview: a version whose preview would hold
//! or block workspaces (or has not finished) is activated only when the
//! request acknowledges that very preview, and the audit log says so.

use abode_guard::Decision;
use abode_store::{page_size, NewPreview, Page, Preview, PreviewResult, TemplateVersion};

use crate::authz::Action;
use crate::error::or_not_found;
use crate::templates::VersionLint;
use crate::{Caller, Control, ControlError};

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

/// Whether activating a version needs its preview acknowledged, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewGate {
    pub preview: Preview,
    /// Why it needs acknowledging; `None`: nothing would be held or blocked.
    pub concern: Option<String>,
}

impl PreviewGate {
    fn of(preview: Preview) -> PreviewGate {
        let concern = activation_concern(&preview);
        PreviewGate { preview, concern }
    }
}

/// Why activating the version of `preview` (its latest preview of the whole
/// fleet) needs it acknowledged: it would hold or block workspaces, some
/// could not be planned (their fate is unknown), or it has not finished;
/// `None` otherwise.
pub fn activation_concern(preview: &Preview) -> Option<String> {
    if preview.pending > 0 {
        Some(format!(
            "its preview has not finished ({} of {} workspaces still to plan)",
            preview.pending, preview.total
        ))
    } else if preview.held + preview.blocked + preview.failed > 0 {
        let mut concern = format!(
            "its preview would hold {} and block {} of {} workspaces",
            preview.held, preview.blocked, preview.total
        );
        if preview.failed > 0 {
            concern.push_str(&format!(", and could not plan {}", preview.failed));
        }
        Some(concern)
    } else {
        None
    }
}

impl Control {
    /// Starts a preview of version `number` of template `name`: of the named
    /// workspaces (`name` or `owner/name`), or of every live workspace of
    /// the template not on that version.
    pub async fn start_preview(
        &self,
        caller: &Caller,
        name: &str,
        number: i64,
        workspaces: &[String],
    ) -> Result<Preview, ControlError> {
        caller.authorize(Action::TemplatePreview, None)?;
        if workspaces.len() > MAX_NAMED_WORKSPACES {
            return Err(ControlError::BadRequest(format!(
                "a preview names at most {MAX_NAMED_WORKSPACES} workspaces; name none to preview them all"
            )));
        }
        let (template, version) = self.version_of(name, number).await?;
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
                    .resolve_workspace(caller, reference, Action::WorkspaceRead)
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
        self.audit_template(
            caller,
            "template.preview",
            name,
            "success",
            Some(format!(
                "version={number} preview={} workspaces={}",
                preview.id, preview.total
            )),
        )
        .await;
        // Every idle worker may take a plan.
        self.inner.jobs_queued.notify_waiters();
        self.job_queued().await;
        Ok(preview)
    }

    /// The latest preview of version `number` with one page of its results
    /// (`None`: the version was never previewed).
    pub async fn preview_report(
        &self,
        caller: &Caller,
        name: &str,
        number: i64,
        after: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Option<PreviewReport>, ControlError> {
        caller.authorize(Action::TemplatePreview, None)?;
        let (_, version) = self.version_of(name, number).await?;
        let Some(preview) = self.inner.store.latest_preview(&version.id, false).await? else {
            return Ok(None);
        };
        let page = self
            .inner
            .store
            .list_preview_result_page(&preview.id, after, page_size(limit))
            .await?;
        let lint = self.stored_lint(&version).await?;
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
    pub async fn preview_gate(
        &self,
        caller: &Caller,
        name: &str,
        number: i64,
    ) -> Result<Option<PreviewGate>, ControlError> {
        caller.authorize(Action::TemplateRead, None)?;
        let (_, version) = self.version_of(name, number).await?;
        Ok(self
            .inner
            .store
            .latest_preview(&version.id, true)
            .await?
            .map(PreviewGate::of))
    }

    /// Activates version `number`; when its latest preview would hold or
    /// block workspaces (or is unfinished), only if `acknowledged` is that
    /// preview's id. The audit log records the preview and the decision.
    pub async fn activate_previewed_version(
        &self,
        caller: &Caller,
        name: &str,
        number: i64,
        acknowledged: Option<&str>,
    ) -> Result<(abode_store::Template, TemplateVersion), ControlError> {
        caller.authorize(Action::TemplateActivate, None)?;
        let (template, version) = self.version_of(name, number).await?;
        let gate = self
            .inner
            .store
            .latest_preview(&version.id, true)
            .await?
            .map(PreviewGate::of);
        let mut details = format!("version={number}");
        if let Some(gate) = &gate {
            let preview = &gate.preview;
            details.push_str(&format!(
                " preview={} held={} blocked={} failed={} pending={}",
                preview.id, preview.held, preview.blocked, preview.failed, preview.pending
            ));
            if let Some(concern) = &gate.concern {
                if acknowledged != Some(preview.id.as_str()) {
                    let message = format!(
                        "version {number} of template \"{name}\" is not activated: {concern}; \
                         review it (abode templates versions show {name} {number}) and activate \
                         acknowledging preview {} (abode templates versions activate {name} {number} --yes)",
                        preview.id
                    );
                    self.audit_template(
                        caller,
                        "template.activate",
                        name,
                        "failure",
                        Some(format!("{details} acknowledged=false")),
                    )
                    .await;
                    return Err(ControlError::Conflict(message));
                }
                details.push_str(" acknowledged=true");
            }
        }
        self.inner
            .store
            .activate_template_version(&template.id, &version.id)
            .await?;
        self.audit_template(caller, "template.activate", name, "success", Some(details))
            .await;
        let template = self.template(name).await?;
        let version = self.inner.store.template_version_by_id(&version.id).await?;
        Ok((template, version))
    }

    /// A template and its version `number`.
    pub(crate) async fn version_of(
        &self,
        name: &str,
        number: i64,
    ) -> Result<(abode_store::Template, TemplateVersion), ControlError> {
        let template = self.template(name).await?;
        let version = or_not_found(
            self.inner
                .store
                .template_version(&template.id, number)
                .await,
            || format!("template \"{name}\" has no version {number}"),
        )?;
        Ok((template, version))
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

impl Control {
    /// The lint kept with a version, parsed (`None`: pushed before the lint).
    pub(crate) async fn stored_lint(
        &self,
        version: &TemplateVersion,
    ) -> Result<Option<VersionLint>, ControlError> {
        self.inner
            .store
            .template_version_lint(&version.id)
            .await?
            .map(|json| {
                serde_json::from_str::<VersionLint>(&json).map_err(|error| {
                    ControlError::Internal(format!(
                        "the lint kept with version {} of template \"{}\" is unreadable: {error}",
                        version.number, version.template_name
                    ))
                })
            })
            .transpose()
    }
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
