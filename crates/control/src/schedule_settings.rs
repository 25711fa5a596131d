//! The settings of the lifecycle scheduler (issue 13), as people change
//! them: a template's policy (template admins), a workspace's schedule
//! (its owner, within what the template allows), extending a running
//! workspace's deadline, waking a dormant one, and activity (the owner's
//! requests acting on a workspace and its agent's reports), which records when
//! the workspace was last used and pushes its deadline. The scheduler's
//! tick reads what is written here; every change is audited.
//!
//! Durations are milliseconds, as the store keeps them, and 0 turns a
//! template rule off; the JSON the API speaks is the same (docs/api.md).

use std::time::Duration;

use abode_schedule::{validate_schedule, Weekdays};
// The wire's types; `PolicyView` and `ScheduleView` say which
// `TemplatePolicy` this is beside the store's.
use abode_sdk::{
    Autostart, ScheduleSpec, TemplatePolicy as PolicyView, TemplatePolicyPatch,
    WorkspaceSchedule as ScheduleView,
};
use abode_store::{Store, TemplatePolicy, Workspace, WorkspaceLifecycle};

use crate::authz::Action;
use crate::times::utc_text as utc;
use crate::workspace_status::{workspace_status, WorkspaceStatus};
use std::sync::Arc;

use crate::audit::{audit_event, workspace_event, Audit};
use crate::{Caller, Clock, ControlError, Templates, Workspaces};

/// Schedule settings; cheap to clone.
#[derive(Clone)]
pub struct ScheduleSettings {
    inner: Arc<ScheduleSettingsParts>,
}

/// What [`ScheduleSettings`] holds.
pub(crate) struct ScheduleSettingsParts {
    pub(crate) store: Store,
    pub(crate) clock: Clock,
    pub(crate) audit: Audit,
    pub(crate) templates: Arc<Templates>,
    pub(crate) workspaces: Workspaces,
}

impl ScheduleSettings {
    pub(crate) fn new(parts: ScheduleSettingsParts) -> ScheduleSettings {
        ScheduleSettings {
            inner: Arc::new(parts),
        }
    }

    fn templates(&self) -> &Templates {
        &self.inner.templates
    }

    fn workspaces(&self) -> &Workspaces {
        &self.inner.workspaces
    }

    fn now_ms(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    /// `GET /templates/{name}/policy`: anyone who reads templates.
    pub async fn policy(&self, caller: &Caller, name: &str) -> Result<PolicyView, ControlError> {
        let template = self
            .templates()
            .template_for(caller, name, Action::TemplateRead)
            .await?;
        let policy = self.inner.store.template_policy(&template.id).await?;
        Ok(policy_view(name, &policy))
    }

    /// `PATCH /templates/{name}/policy`: template admins and owners.
    pub async fn edit_policy(
        &self,
        caller: &Caller,
        name: &str,
        patch: &TemplatePolicyPatch,
    ) -> Result<PolicyView, ControlError> {
        let template = self
            .templates()
            .template_for(caller, name, Action::TemplatePolicyEdit)
            .await?;
        let current = self.inner.store.template_policy(&template.id).await?;
        let policy = patched(current, patch)?;
        self.inner.store.set_template_policy(&policy).await?;
        let view = policy_view(name, &policy);
        self.inner
            .audit
            .record(&audit_event(
                Some(&caller.user),
                caller.request_id.clone(),
                "template.policy",
                "template",
                name,
                "success",
                serde_json::to_string(patch).ok(),
            ))
            .await;
        Ok(view)
    }

    /// `GET /workspaces/{ws}/schedule`: whoever reads the workspace.
    pub async fn schedule(
        &self,
        caller: &Caller,
        reference: &str,
    ) -> Result<ScheduleView, ControlError> {
        let workspace = self
            .workspaces()
            .resolve(caller, reference, Action::WorkspaceRead)
            .await?;
        self.schedule_view(reference, &workspace).await
    }

    /// `PUT /workspaces/{ws}/schedule`: the owner sets the whole schedule. A
    /// part the template does not let owners set is refused when it
    /// changes (so that a schedule set before the policy changed does not
    /// stop its owner from changing the other part).
    pub async fn set_schedule(
        &self,
        caller: &Caller,
        reference: &str,
        spec: &ScheduleSpec,
    ) -> Result<ScheduleView, ControlError> {
        let workspace = self
            .workspaces()
            .resolve(caller, reference, Action::WorkspaceScheduleEdit)
            .await?;
        let policy = self
            .inner
            .store
            .template_policy(&workspace.template_id)
            .await?;
        let stored = self.inner.store.workspace_lifecycle(&workspace.id).await?;
        let autostart = spec.autostart.as_ref().map(|autostart| Autostart {
            cron: autostart.cron.trim().to_string(),
            timezone: autostart.timezone.trim().to_string(),
        });
        if let Some(autostart) = &autostart {
            validate_schedule(&autostart.cron, &autostart.timezone)
                .map_err(|error| ControlError::BadRequest(error.to_string()))?;
        }
        let ttl_ms = spec.ttl_ms.map(to_ms).transpose()?;
        if autostart != stored_autostart(&stored)
            && autostart.is_some()
            && !policy.allow_user_autostart
        {
            return Err(ControlError::Forbidden(format!(
                "template of workspace \"{reference}\" does not allow owners to set an autostart schedule"
            )));
        }
        if ttl_ms != stored.ttl_ms && !policy.allow_user_autostop {
            return Err(ControlError::Forbidden(format!(
                "template of workspace \"{reference}\" does not allow owners to set an autostop ttl"
            )));
        }
        self.inner
            .store
            .set_workspace_autostart(
                &workspace.id,
                autostart.as_ref().map(|a| a.cron.as_str()),
                autostart.as_ref().map(|a| a.timezone.as_str()),
            )
            .await?;
        self.inner
            .store
            .set_workspace_ttl(&workspace.id, ttl_ms)
            .await?;
        self.inner
            .audit
            .record(&workspace_event(
                caller,
                &workspace.id,
                "workspace.schedule",
                reference,
                "success",
                serde_json::to_string(&ScheduleSpec {
                    autostart,
                    ttl_ms: spec.ttl_ms,
                })
                .ok(),
            ))
            .await;
        self.schedule_view(reference, &workspace).await
    }

    /// `POST /workspaces/{ws}/extend`: the running workspace is stopped
    /// `by` from now instead of at its deadline; refused beyond its hard
    /// deadline (the template's max ttl), when it is not running, and when
    /// it has no deadline to move.
    pub async fn extend(
        &self,
        caller: &Caller,
        reference: &str,
        by: Duration,
    ) -> Result<ScheduleView, ControlError> {
        let workspace = self
            .workspaces()
            .resolve(caller, reference, Action::WorkspaceScheduleEdit)
            .await?;
        let latest = self.inner.store.latest_build(&workspace.id).await?;
        if workspace_status(&latest) != WorkspaceStatus::Running {
            return Err(ControlError::Conflict(format!(
                "workspace \"{reference}\" is not running: only a running workspace's deadline can be extended"
            )));
        }
        let stored = self.inner.store.workspace_lifecycle(&workspace.id).await?;
        if stored.deadline.is_none() {
            return Err(ControlError::Conflict(format!(
                "workspace \"{reference}\" has no autostop deadline to extend"
            )));
        }
        let deadline = self.now_ms().saturating_add(to_ms(duration_ms(by))?);
        if let Some(max) = stored.max_deadline.filter(|max| deadline > *max) {
            return Err(ControlError::Conflict(format!(
                "cannot extend workspace \"{reference}\" past its template's max ttl: at most until {}",
                utc(max)
            )));
        }
        self.inner
            .store
            .set_deadlines(&workspace.id, Some(deadline), stored.max_deadline)
            .await?;
        self.inner
            .audit
            .record(&workspace_event(
                caller,
                &workspace.id,
                "workspace.extend",
                reference,
                "success",
                Some(format!("deadline={}", utc(deadline))),
            ))
            .await;
        self.schedule_view(reference, &workspace).await
    }

    /// `POST /workspaces/{ws}/wake` (`abode workspaces dormant WS --off`):
    /// a dormant workspace is no longer dormant nor due for deletion, and
    /// counts as used now.
    pub async fn wake(
        &self,
        caller: &Caller,
        reference: &str,
    ) -> Result<ScheduleView, ControlError> {
        let workspace = self
            .workspaces()
            .resolve(caller, reference, Action::WorkspaceScheduleEdit)
            .await?;
        if !self
            .inner
            .store
            .wake_workspace(&workspace.id, self.now_ms())
            .await?
        {
            return Err(ControlError::Conflict(format!(
                "workspace \"{reference}\" is not dormant"
            )));
        }
        self.inner
            .audit
            .record(&workspace_event(
                caller,
                &workspace.id,
                "workspace.wake",
                reference,
                "success",
                None,
            ))
            .await;
        self.schedule_view(reference, &workspace).await
    }

    async fn schedule_view(
        &self,
        reference: &str,
        workspace: &Workspace,
    ) -> Result<ScheduleView, ControlError> {
        let policy = self
            .inner
            .store
            .template_policy(&workspace.template_id)
            .await?;
        let stored = self.inner.store.workspace_lifecycle(&workspace.id).await?;
        Ok(ScheduleView {
            workspace: reference.to_string(),
            autostart: stored_autostart(&stored),
            ttl_ms: stored.ttl_ms.map(from_ms),
            allow_user_autostart: policy.allow_user_autostart,
            allow_user_autostop: policy.allow_user_autostop,
            template_default_ttl_ms: from_ms(policy.default_ttl_ms),
            template_max_ttl_ms: from_ms(policy.max_ttl_ms),
            autostart_days: policy.autostart_days,
            deadline: stored.deadline,
            max_deadline: stored.max_deadline,
            last_used_at: stored.last_used_at,
            dormant_at: stored.dormant_at,
            deleting_at: stored.deleting_at,
        })
    }
}

fn stored_autostart(stored: &WorkspaceLifecycle) -> Option<Autostart> {
    match (&stored.autostart_cron, &stored.autostart_timezone) {
        (Some(cron), Some(timezone)) => Some(Autostart {
            cron: cron.clone(),
            timezone: timezone.clone(),
        }),
        _ => None,
    }
}

fn policy_view(name: &str, policy: &TemplatePolicy) -> PolicyView {
    PolicyView {
        template: name.to_string(),
        default_ttl_ms: from_ms(policy.default_ttl_ms),
        activity_bump_ms: from_ms(policy.activity_bump_ms),
        max_ttl_ms: from_ms(policy.max_ttl_ms),
        autostart_days: policy.autostart_days.clone(),
        allow_user_autostart: policy.allow_user_autostart,
        allow_user_autostop: policy.allow_user_autostop,
        failure_ttl_ms: from_ms(policy.failure_ttl_ms),
        dormancy_threshold_ms: from_ms(policy.dormancy_threshold_ms),
        dormancy_auto_deletion_ms: from_ms(policy.dormancy_auto_deletion_ms),
        require_active_version: policy.require_active_version,
        allow_sharing: policy.allow_sharing,
    }
}

/// The policy with `patch` applied, checked as a whole: known weekdays,
/// durations that fit, and a default ttl within the max ttl.
fn patched(
    mut policy: TemplatePolicy,
    patch: &TemplatePolicyPatch,
) -> Result<TemplatePolicy, ControlError> {
    let durations = [
        (&mut policy.default_ttl_ms, patch.default_ttl_ms),
        (&mut policy.activity_bump_ms, patch.activity_bump_ms),
        (&mut policy.max_ttl_ms, patch.max_ttl_ms),
        (&mut policy.failure_ttl_ms, patch.failure_ttl_ms),
        (
            &mut policy.dormancy_threshold_ms,
            patch.dormancy_threshold_ms,
        ),
        (
            &mut policy.dormancy_auto_deletion_ms,
            patch.dormancy_auto_deletion_ms,
        ),
    ];
    for (field, value) in durations {
        if let Some(value) = value {
            *field = to_ms(value)?;
        }
    }
    if let Some(days) = &patch.autostart_days {
        let days = Weekdays::parse(days).map_err(|error| {
            ControlError::BadRequest(format!(
                "autostart_days: {error} (expected days such as mon,tue,wed,thu,fri,sat,sun)"
            ))
        })?;
        policy.autostart_days = days.to_string();
    }
    for (field, value) in [
        (&mut policy.allow_user_autostart, patch.allow_user_autostart),
        (&mut policy.allow_user_autostop, patch.allow_user_autostop),
        (
            &mut policy.require_active_version,
            patch.require_active_version,
        ),
        (&mut policy.allow_sharing, patch.allow_sharing),
    ] {
        if let Some(value) = value {
            *field = value;
        }
    }
    if policy.max_ttl_ms > 0 && policy.default_ttl_ms > policy.max_ttl_ms {
        return Err(ControlError::BadRequest(format!(
            "default ttl ({}) is longer than the max ttl ({}): lower it or raise the max",
            show_ms(policy.default_ttl_ms),
            show_ms(policy.max_ttl_ms)
        )));
    }
    Ok(policy)
}

/// The longest duration the store keeps: about 292 million years.
fn to_ms(value: u64) -> Result<i64, ControlError> {
    i64::try_from(value)
        .map_err(|_| ControlError::BadRequest(format!("duration {value} ms is too long")))
}

fn from_ms(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn show_ms(ms: i64) -> String {
    format!("{}m", ms / 60_000)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_patch_sets_what_it_names_and_checks_the_whole() {
        let base = TemplatePolicy {
            template_id: "t".into(),
            default_ttl_ms: 0,
            activity_bump_ms: 3_600_000,
            max_ttl_ms: 0,
            autostart_days: "mon,tue,wed,thu,fri,sat,sun".into(),
            allow_user_autostart: true,
            allow_user_autostop: true,
            failure_ttl_ms: 0,
            dormancy_threshold_ms: 0,
            dormancy_auto_deletion_ms: 0,
            require_active_version: false,
            allow_sharing: true,
        };
        // (patch, Ok(expected changes) or Err(part of the message))
        type Expected = Result<fn(&mut TemplatePolicy), &'static str>;
        let cases: Vec<(TemplatePolicyPatch, Expected)> = vec![
            (TemplatePolicyPatch::default(), Ok(|_| {})),
            (
                TemplatePolicyPatch {
                    default_ttl_ms: Some(8 * 3_600_000),
                    max_ttl_ms: Some(24 * 3_600_000),
                    ..TemplatePolicyPatch::default()
                },
                Ok(|p| {
                    p.default_ttl_ms = 8 * 3_600_000;
                    p.max_ttl_ms = 24 * 3_600_000;
                }),
            ),
            (
                TemplatePolicyPatch {
                    autostart_days: Some("Friday, mon".into()),
                    allow_user_autostart: Some(false),
                    require_active_version: Some(true),
                    ..TemplatePolicyPatch::default()
                },
                Ok(|p| {
                    p.autostart_days = "mon,fri".into();
                    p.allow_user_autostart = false;
                    p.require_active_version = true;
                }),
            ),
            (
                TemplatePolicyPatch {
                    autostart_days: Some("mon,funday".into()),
                    ..TemplatePolicyPatch::default()
                },
                Err("funday"),
            ),
            (
                TemplatePolicyPatch {
                    default_ttl_ms: Some(2 * 3_600_000),
                    max_ttl_ms: Some(3_600_000),
                    ..TemplatePolicyPatch::default()
                },
                Err("longer than the max ttl"),
            ),
            (
                TemplatePolicyPatch {
                    failure_ttl_ms: Some(u64::MAX),
                    ..TemplatePolicyPatch::default()
                },
                Err("too long"),
            ),
        ];
        for (patch, expected) in cases {
            let result = patched(base.clone(), &patch);
            match (result, expected) {
                (Ok(policy), Ok(change)) => {
                    let mut want = base.clone();
                    change(&mut want);
                    assert_eq!(policy, want, "{patch:?}");
                }
                (Err(error), Err(part)) => {
                    assert!(error.to_string().contains(part), "{patch:?}: {error}")
                }
                (result, _) => panic!("{patch:?}: {result:?}"),
            }
        }
    }
}
