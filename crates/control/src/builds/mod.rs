//! The door every build request goes through, a person's or the system's
//! (the scheduler, prebuilds, a rename, a restart, a retained resource's
//! expiry). A build goes from "requested" here to "applied" in
//! `provisioner/`.
//!
//! A service of its own (`Control::builds()`): it holds the store, the
//! clock, the handles of the templates, identity (roles, for template
//! access), external auth (a start's required links), the build log, the
//! job queue and the audit log, and nothing else of the control plane.
//! Whether a person may act on the workspace they name is asked before
//! (`workspace_builds.rs`); what may be built now is asked here.

mod claim;
pub mod create_estimate;
mod quota_estimate;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use abode_runner::{LogLevel, LogStage};
use abode_store::{
    Build, BuildReason, NewBuild, NewWorkspace, PrebuildClaimed, Store, StoreError, SystemActor,
    Template, TemplateVersion, Transition, User, Workspace,
};

use serde_json::Value;

use crate::audit::{audit_event, Audit};
use crate::error::or_not_found;
use crate::external_auth::ExternalAuth;
use crate::parameters::{check_parameters, CheckKind};
use crate::presets::{
    matching_preset, named_preset, stored_presets, with_preset, PresetDefinition,
};
use crate::validate_name;
use crate::workspace_status;
use crate::Actor;
use crate::ControlError;
use crate::{BuildLog, Clock, Identity, JobQueue, Metrics, Templates};

/// What a build request asks for.
#[derive(Debug, Clone)]
pub struct BuildRequest {
    pub transition: Transition,
    /// The version it plans: an update asks for the active one.
    pub version: VersionChoice,
    /// New parameter values (a start or an update), as received.
    pub parameters: BTreeMap<String, Value>,
    /// What a delete retains (`None`: as the template's rules say).
    pub retention: Option<abode_store::DeleteRetention>,
    /// What a delete says of the unsaved work the last report shows.
    pub unsaved: crate::UnsavedConsent,
}

/// Which template version a build plans: current, active or a number,
/// one name from the CLI to the store (the contract's).
pub use abode_contract::VersionChoice;

/// The workspace a build is for.
#[derive(Debug, Clone)]
pub enum BuildTarget {
    Existing(Workspace),
    /// A workspace this build creates: both are recorded in one transaction.
    New {
        name: String,
        owner: User,
        template: Template,
        /// The preset to create it with; `None`: the version's preset whose
        /// values are exactly the requested ones, if one is.
        preset: Option<String>,
    },
    /// The deleted workspace a retained resource came from: its build
    /// destroys that resource (`abode retained destroy`, or its expiry),
    /// with a state holding only it.
    Retained {
        workspace: Workspace,
        record: Box<abode_store::RetainedResource>,
    },
}

/// What the door is asked for.
#[derive(Debug, Clone)]
pub struct BuildOrder {
    pub actor: Actor,
    /// The API request it came with, for the audit log.
    pub request_id: Option<String>,
    pub transition: Transition,
    pub version: VersionChoice,
    pub reason: BuildReason,
    /// Parameter values given with the request, as the API received them;
    /// checked against the version's declarations (the workspace's own
    /// values stand for those not given).
    pub parameters: BTreeMap<String, Value>,
    /// What a delete retains (`None`: as the template's rules say).
    pub retention: Option<abode_store::DeleteRetention>,
    /// A rename's new name: the build, of the workspace's current
    /// transition, plans under it (`rename_restart.rs`).
    pub rename_to: Option<String>,
    /// A restart's stop: a start follows once it succeeds.
    pub then_start: bool,
}

/// The door; cheap to clone.
#[derive(Clone)]
pub struct Builds {
    inner: Arc<BuildsParts>,
}

/// What the door holds.
pub(crate) struct BuildsParts {
    pub(crate) store: Store,
    pub(crate) clock: Clock,
    pub(crate) metrics: Metrics,
    /// Whether a create that clearly does not fit its owner's budget is
    /// refused before any plan (`--quota-enforce`).
    pub(crate) quota_enforce: bool,
    /// A prebuild whose agent was not heard from within this is not claimed.
    pub(crate) agent_heartbeat: Duration,
    pub(crate) templates: Arc<Templates>,
    pub(crate) identity: Arc<Identity>,
    pub(crate) external_auth: ExternalAuth,
    pub(crate) build_log: BuildLog,
    pub(crate) jobs: JobQueue,
    pub(crate) audit: Audit,
    /// The switches of the builds this process runs.
    pub(crate) cancel_switches: crate::cancel_switches::CancelSwitches,
}

impl Builds {
    pub(crate) fn new(parts: BuildsParts) -> Builds {
        Builds {
            inner: Arc::new(parts),
        }
    }

    /// The cancel switches of the builds this process runs: the machine
    /// room registers them, a cancel flips them.
    pub fn cancel_switches(&self) -> &crate::cancel_switches::CancelSwitches {
        &self.inner.cancel_switches
    }

    fn templates(&self) -> &Templates {
        &self.inner.templates
    }

    fn identity(&self) -> &Identity {
        &self.inner.identity
    }

    fn external_auth(&self) -> &ExternalAuth {
        &self.inner.external_auth
    }

    fn build_log(&self) -> &BuildLog {
        &self.inner.build_log
    }

    fn jobs(&self) -> &JobQueue {
        &self.inner.jobs
    }

    /// The door: every build, asked for by a person or by the system, is
    /// requested here. It checks what may be built now (the workspace's
    /// state and active build, the version, the parameters), records the
    /// build with its job (and a new workspace with its first build) in one
    /// transaction, audits it with its actor and reason, and wakes a worker.
    /// From there the provisioner (`provisioner/mod.rs`) takes it to
    /// "applied", through the guard.
    pub async fn request(
        &self,
        target: BuildTarget,
        order: BuildOrder,
    ) -> Result<Build, ControlError> {
        // A new workspace (a create, a prebuild claim) is a use of the
        // template: its access list is asked here. A person's existing
        // workspace keeps starting and updating after they leave the list,
        // as the scheduler's autostart does: losing access to a template
        // never locks anyone out of their own workspace and files.
        if order.transition == Transition::Start && matches!(target, BuildTarget::New { .. }) {
            self.may_build_from(&target, &order.actor).await?;
        }
        let build = match target {
            BuildTarget::New {
                name,
                owner,
                template,
                preset,
            } => {
                self.request_first_build(&name, &owner, &template, preset.as_deref(), &order)
                    .await?
            }
            BuildTarget::Existing(workspace) => self.request_next_build(&workspace, &order).await?,
            BuildTarget::Retained { workspace, record } => {
                self.request_retained_destroy(&workspace, &record, &order)
                    .await?
            }
        };
        self.tell_if_locked(&build).await;
        self.jobs().queued().await;
        self.audit_build(
            &order.actor,
            order.request_id.clone(),
            &build,
            order.retention,
        )
        .await;
        Ok(build)
    }

    /// Records a requested build with its actor, reason and what it retains.
    async fn audit_build(
        &self,
        actor: &Actor,
        request_id: Option<String>,
        build: &Build,
        retention: Option<abode_store::DeleteRetention>,
    ) {
        // A delete that asked to retain everything or nothing says so: the
        // record of who destroyed what a template said to keep.
        let retain = match retention {
            Some(retention) if retention != abode_store::DeleteRetention::Rules => {
                format!(" retain={retention}")
            }
            _ => String::new(),
        };
        let mut retain = retain;
        if let Some(new_name) = &build.rename_to {
            retain.push_str(&format!(" rename_to={new_name}"));
        }
        if build.then_start {
            retain.push_str(" then=start");
        }
        let mut event = audit_event(
            actor.user(),
            request_id,
            "build.start",
            "workspace",
            &format!("{}/{}", build.owner_name, build.workspace_name),
            "success",
            Some(format!(
                "build={} transition={} reason={} version={}{retain}",
                build.number, build.transition, build.reason, build.template_version
            )),
        );
        event.workspace_id = Some(build.workspace_id.clone());
        self.inner.audit.record_as(actor, event).await;
    }

    /// Whether `actor` may create a workspace from `target`'s template (its
    /// access list, [`crate::templates::Templates::may_build_from`]).
    async fn may_build_from(
        &self,
        target: &BuildTarget,
        actor: &Actor,
    ) -> Result<(), ControlError> {
        let roles = match actor {
            Actor::User(user) => self.identity().roles_of(&user.id).await?,
            Actor::System(_) => crate::authz::Roles::new(),
        };
        match target {
            BuildTarget::New { template, .. } => {
                self.templates()
                    .may_build_from(actor, &roles, template, true)
                    .await
            }
            BuildTarget::Existing(workspace) | BuildTarget::Retained { workspace, .. } => {
                let template = self.templates().template(&workspace.template_name).await?;
                self.templates()
                    .may_build_from(actor, &roles, &template, false)
                    .await
            }
        }
    }

    /// Says in the new build's log, before it waits, that a lost holder's
    /// build keeps the workspace locked: the build runs once that holder
    /// reports its Terraform ended, or a person unlocks it.
    async fn tell_if_locked(&self, build: &Build) {
        let lock = match self
            .inner
            .store
            .state_lock_of_workspace(&build.workspace_id)
            .await
        {
            Ok(Some(lock)) if lock.build_id != build.id => lock,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(build = %build.id, %error, "cannot read the workspace's state lock");
                return;
            }
        };
        let since = lock.lost_at.unwrap_or(lock.taken_at);
        let notice = format!(
            "waiting: the workspace is locked by build #{} ({}{} since {}); this build runs \
             once that Terraform reports it ended, or after an owner or template admin checks that \
             it no longer runs and unlocks it: abode workspaces unlock {}/{} --build {}",
            lock.build_number,
            crate::holders::describe_holder(&lock.holder),
            if lock.lost_at.is_some() { ", lost" } else { "" },
            crate::times::utc_text(since),
            build.owner_name,
            build.workspace_name,
            lock.build_number,
        );
        self.build_log()
            .note(&build.id, &LogStage::SETUP, LogLevel::Warn, &notice)
            .await;
    }

    async fn request_first_build(
        &self,
        name: &str,
        owner: &User,
        template: &Template,
        preset: Option<&str>,
        order: &BuildOrder,
    ) -> Result<Build, ControlError> {
        validate_name("workspace name", name)?;
        if order.transition != Transition::Start {
            return Err(ControlError::BadRequest(
                "a new workspace's first build is a start".into(),
            ));
        }
        let version = self.chosen_version(template, None, order.version).await?;
        self.refuse_unlinked(owner, &version).await?;
        let creation = resolve_creation(&version, preset, &order.parameters)?;
        // A create finds its preset first, then builds. A person's create
        // whose values are exactly a pool's (its preset alone, the active
        // version) takes a ready prebuilt workspace of it when there is one.
        let pool = self.create_pool(template, &version, &creation, order.reason);
        // A workspace that adopts retained resources is built, never
        // claimed: a claim's plan may replace anything, an adoption's may not.
        let adopting = !self
            .inner
            .store
            .retained_to_adopt(&crate::retention::adopt_key(&owner.id, name))
            .await?
            .is_empty();
        let pool = pool.filter(|_| !adopting);
        // With quotas enforced, a create whose values are exactly a pool's
        // preset has a cheap, exact estimate: what the pool's last prebuild
        // plan cost. One that clearly does not fit is refused now, before
        // anything is claimed or built.
        let estimate = match &pool {
            Some(pool) if self.inner.quota_enforce => {
                self.estimate_pool_create(owner, name, &version, pool)
                    .await?
            }
            _ => None,
        };
        // Why a pool's preset is built from scratch, for the build's log.
        let mut scratch = None;
        if let Some(pool) = &pool {
            let claimed = self
                .claim_prebuild(&order.actor, owner, name, &version, pool)
                .await
                .map_err(|error| name_taken(error, name, owner, order))?;
            match claimed {
                PrebuildClaimed::Claimed(build) => {
                    if let Some(estimate) = &estimate {
                        self.build_log()
                            .note(&build.id, &LogStage::QUOTA, LogLevel::Info, estimate)
                            .await;
                    }
                    self.build_log()
                        .note(
                            &build.id,
                            &LogStage::SETUP,
                            LogLevel::Info,
                            &format!(
                                "claimed a prebuilt workspace of preset \"{}\": it is already \
                             running; this build hands it over",
                                pool.name
                            ),
                        )
                        .await;
                    return Ok(*build);
                }
                PrebuildClaimed::NoneReady => {
                    scratch = Some(format!(
                        "no prebuilt workspace of preset \"{}\" was ready: this workspace is \
                         built from scratch",
                        pool.name
                    ));
                }
                PrebuildClaimed::OverBudget { usage, cost } => {
                    scratch = Some(format!(
                        "a prebuilt workspace of preset \"{}\" costs {cost} a day, which {}'s \
                         budget has no room for ({} of {} used): it stays in its pool; this \
                         workspace is built from scratch and its plan judged by quota",
                        pool.name,
                        owner.username,
                        usage.spent(),
                        usage.budget()
                    ));
                }
            }
        }
        let early =
            self.inner.quota_enforce && pool.is_none() && order.reason == BuildReason::Initiator;
        let judged = early.then(|| (version.clone(), creation.clone()));
        let build = self
            .build_new_workspace(name, owner, template, version, creation, order)
            .await?;
        if let Some((version, creation)) = judged {
            self.judge_create_estimate(owner, &version, &creation, &build)
                .await?;
        }
        if let Some(estimate) = &estimate {
            self.build_log()
                .note(&build.id, &LogStage::QUOTA, LogLevel::Info, estimate)
                .await;
        }
        if let Some(scratch) = scratch {
            self.build_log()
                .note(&build.id, &LogStage::SETUP, LogLevel::Info, &scratch)
                .await;
        }
        Ok(build)
    }

    /// The pool whose prebuilt workspace a create of `creation` may claim:
    /// a person's create whose values are exactly a pool's preset's (its
    /// values alone) on the active version.
    pub(crate) fn create_pool(
        &self,
        template: &Template,
        version: &TemplateVersion,
        creation: &Creation,
        reason: BuildReason,
    ) -> Option<PresetDefinition> {
        creation
            .preset
            .as_ref()
            .filter(|preset| {
                preset.prebuilds.is_some()
                    && creation.exact
                    && reason == BuildReason::Initiator
                    && template.active_version_id.as_deref() == Some(version.id.as_str())
            })
            .cloned()
    }

    /// The estimate of a create of `pool`'s preset on `version` (the active
    /// one) for `owner`, from the pool's last costed prebuild plan: `None`
    /// when there is none; the line for the build's log when it fits; a
    /// refusal (`QuotaExceeded`) when it does not. Advisory: the build's
    /// plan is still judged, in the reservation's transaction.
    async fn estimate_pool_create(
        &self,
        owner: &User,
        name: &str,
        version: &TemplateVersion,
        pool: &PresetDefinition,
    ) -> Result<Option<String>, ControlError> {
        let Some(cost) = self
            .inner
            .store
            .prebuild_pool_cost(SystemActor::Prebuilds.user_id(), &version.id, &pool.name)
            .await?
        else {
            return Ok(None);
        };
        let usage = self.inner.store.quota_usage(&owner.id).await?;
        let (spent, budget) = (usage.spent(), usage.budget());
        let source = format!("the last prebuild plan of preset \"{}\"", pool.name);
        if spent.saturating_add(cost) > budget {
            self.inner.metrics.quota_refusal("estimate");
            return Err(ControlError::QuotaExceeded(format!(
                "refused by quota before anything was built: {name} would cost {cost} a day \
                 ({source}); {} already uses {spent} of a budget of {budget} ({} remain)",
                owner.username,
                budget.saturating_sub(spent).max(0)
            )));
        }
        Ok(Some(format!(
            "estimated daily cost: {cost} a day ({source}); {} uses {spent} of a budget of {budget}",
            owner.username
        )))
    }

    /// Records a new workspace and its first build, a start of `version`
    /// with the values of `creation`.
    async fn build_new_workspace(
        &self,
        name: &str,
        owner: &User,
        template: &Template,
        version: TemplateVersion,
        creation: Creation,
        order: &BuildOrder,
    ) -> Result<Build, ControlError> {
        let parameters = creation.kept;
        let workspace_id = abode_store::new_id();
        let created = self
            .inner
            .store
            .create_workspace(
                &NewWorkspace {
                    id: workspace_id.clone(),
                    owner_id: owner.id.clone(),
                    name: name.into(),
                    template_id: template.id.clone(),
                    template_version_id: version.id.clone(),
                    parameters: parameters.clone(),
                    preset_name: creation.preset.map(|preset| preset.name),
                },
                &NewBuild {
                    id: abode_store::new_id(),
                    workspace_id,
                    transition: Transition::Start,
                    template_version_id: version.id,
                    initiator_id: order.actor.id().to_string(),
                    reason: order.reason,
                    parameters: Some(creation.values),
                    workspace_parameters: Some(parameters),
                    retention: None,
                    rename_to: None,
                    then_start: false,
                },
            )
            .await;
        match created {
            Ok((_, build)) => Ok(build),
            Err(error) => Err(name_taken(error, name, owner, order)),
        }
    }

    /// A delete of a retained resource's deleted workspace whose state
    /// holds only that resource again (its object as it was before the
    /// workspace's delete, a successor of the stored state): the plan
    /// destroys exactly it, judged like any destroy of protected data.
    async fn request_retained_destroy(
        &self,
        workspace: &Workspace,
        record: &abode_store::RetainedResource,
        order: &BuildOrder,
    ) -> Result<Build, ControlError> {
        let fragment = self
            .inner
            .store
            .retained_state_fragment(&record.id)
            .await?
            .ok_or_else(|| {
                ControlError::Conflict(format!(
                    "retained resource \"{}\" was retained before Abode kept its state; destroy it outside Abode and close it",
                    record.id
                ))
            })?;
        let stored = self.inner.store.state(&workspace.id).await?;
        let state = crate::retention::state_of_one(stored.as_deref(), &fragment)
            .map_err(ControlError::Internal)?;
        let created = self
            .inner
            .store
            .create_retained_destroy_build(
                &record.id,
                &NewBuild {
                    id: abode_store::new_id(),
                    workspace_id: workspace.id.clone(),
                    transition: Transition::Delete,
                    template_version_id: workspace.template_version_id.clone(),
                    initiator_id: order.actor.id().to_string(),
                    reason: order.reason,
                    parameters: None,
                    workspace_parameters: None,
                    retention: Some(abode_store::DeleteRetention::Nothing),
                    rename_to: None,
                    then_start: false,
                },
                &state,
            )
            .await;
        match created {
            Ok(build) => Ok(build),
            Err(StoreError::Conflict(_)) => Err(ControlError::Conflict(format!(
                "retained resource \"{}\" is being destroyed already; confirm or cancel that build first",
                record.id
            ))),
            Err(StoreError::NotFound(_)) => Err(ControlError::Conflict(format!(
                "retained resource \"{}\" is not open any more",
                record.id
            ))),
            Err(other) => Err(other.into()),
        }
    }

    async fn request_next_build(
        &self,
        workspace: &Workspace,
        order: &BuildOrder,
    ) -> Result<Build, ControlError> {
        let version = match order.version {
            VersionChoice::Current => None,
            choice => {
                if order.transition != Transition::Start {
                    return Err(ControlError::BadRequest(format!(
                        "a {} build runs the workspace's current version; only a start updates",
                        order.transition
                    )));
                }
                let template = self.templates().template(&workspace.template_name).await?;
                Some(
                    self.chosen_version(&template, Some(workspace), choice)
                        .await?,
                )
            }
        };
        let version = match version {
            Some(version) => version,
            None => {
                self.inner
                    .store
                    .template_version_by_id(&workspace.template_version_id)
                    .await?
            }
        };
        if order.transition == Transition::Start {
            let owner = self.inner.store.user_by_id(&workspace.owner_id).await?;
            self.refuse_unlinked(&owner, &version).await?;
        }
        let version_id = version.id.clone();
        // A start checks the values against the version it plans (new
        // values on top of the workspace's); they become the workspace's only
        // if the build succeeds. Stop and delete run on what the workspace has.
        let (parameters, workspace_parameters) = match order.transition {
            Transition::Start => {
                let kind = if version.id == workspace.template_version_id {
                    CheckKind::Start
                } else {
                    CheckKind::Update
                };
                let (values, kept) = resolve_parameters(
                    &version,
                    &order.parameters,
                    Some(&workspace.parameters),
                    kind,
                )?;
                (Some(values), Some(kept))
            }
            _ if !order.parameters.is_empty() => {
                return Err(ControlError::BadRequest(format!(
                    "parameters are given with a start, an update or a create, not a {}",
                    order.transition
                )))
            }
            _ => (None, None),
        };
        let latest = self.inner.store.latest_build(&workspace.id).await?;
        if order.rename_to.is_some() {
            // A rename builds the workspace again as it is, under its new name.
            let last_succeeded = self
                .inner
                .store
                .latest_succeeded_build(&workspace.id)
                .await?;
            let current =
                workspace_status::check_rename_build(workspace, &latest, last_succeeded.as_ref())?;
            if current != order.transition {
                return Err(ControlError::Conflict(format!(
                    "workspace \"{}\" changed while it was being renamed; try again",
                    workspace.name
                )));
            }
        } else {
            workspace_status::check_new_build(workspace, &latest, order.transition, &version_id)?;
        }
        let created = self
            .inner
            .store
            .create_build(&NewBuild {
                id: abode_store::new_id(),
                workspace_id: workspace.id.clone(),
                transition: order.transition,
                template_version_id: version_id,
                initiator_id: order.actor.id().to_string(),
                reason: order.reason,
                parameters,
                workspace_parameters,
                retention: (order.transition == Transition::Delete)
                    .then(|| order.retention.unwrap_or_default()),
                rename_to: order.rename_to.clone(),
                then_start: order.then_start,
            })
            .await;
        match created {
            Ok(build) => Ok(build),
            Err(StoreError::Conflict(_)) => Err(ControlError::Conflict(format!(
                "workspace \"{}\" already has a build pending or running; wait for it or cancel it",
                workspace.name
            ))),
            Err(StoreError::NotFound(_)) => Err(ControlError::Conflict(format!(
                "workspace \"{}\" was deleted",
                workspace.name
            ))),
            Err(other) => Err(other.into()),
        }
    }

    /// Refuses a start of `version` for `owner` (a create, a start, a
    /// claim) before any plan when the version requires an external auth
    /// provider they have not linked, saying where to link it. Prebuilt
    /// workspaces (a system actor's) need none until claimed.
    async fn refuse_unlinked(
        &self,
        owner: &User,
        version: &TemplateVersion,
    ) -> Result<(), ControlError> {
        if owner.system {
            return Ok(());
        }
        let needs = self
            .inner
            .store
            .template_version_external_auth(&version.id)
            .await?;
        if needs.iter().all(|need| need.optional) {
            return Ok(());
        }
        let linked = self.external_auth().linked_providers(&owner.id).await?;
        match needs
            .iter()
            .find(|need| !need.optional && !linked.contains(&need.provider))
        {
            None => Ok(()),
            Some(missing) => Err(ControlError::ExternalAuthRequired(format!(
                "template \"{}\" requires a linked {} account and {} has not linked one: link it at {} (or run abode external-auth link {}), then try again",
                version.template_name,
                missing.provider,
                owner.username,
                self.external_auth().link_page(),
                missing.provider
            ))),
        }
    }

    /// The template version a build plans: it must exist and have passed
    /// validation at push.
    pub(crate) async fn chosen_version(
        &self,
        template: &Template,
        workspace: Option<&Workspace>,
        choice: VersionChoice,
    ) -> Result<TemplateVersion, ControlError> {
        let version = match (choice, workspace) {
            (VersionChoice::Current, Some(workspace)) => {
                self.inner
                    .store
                    .template_version_by_id(&workspace.template_version_id)
                    .await?
            }
            (VersionChoice::Number(number), _) => or_not_found(
                self.inner
                    .store
                    .template_version(&template.id, number)
                    .await,
                || format!("template \"{}\" has no version {number}", template.name),
            )?,
            (VersionChoice::Active | VersionChoice::Current, _) => {
                let active = template.active_version_id.as_deref().ok_or_else(|| {
                    ControlError::Conflict(format!(
                        "template \"{}\" has no active version",
                        template.name
                    ))
                })?;
                self.inner.store.template_version_by_id(active).await?
            }
        };
        if !version.validation_ok {
            return Err(ControlError::Conflict(format!(
                "version {} of template \"{}\" did not pass validation: {}",
                version.number, template.name, version.validation_message
            )));
        }
        Ok(version)
    }
}

/// A new workspace's name taken by another of the owner's (the store's
/// `Conflict`), said as the person sees it; other errors as they are.
fn name_taken(error: StoreError, name: &str, owner: &User, order: &BuildOrder) -> ControlError {
    match error {
        StoreError::Conflict(_) => ControlError::Conflict(if order.actor.id() == owner.id {
            format!("you already have a workspace named \"{name}\"")
        } else {
            format!(
                "user \"{}\" already has a workspace named \"{name}\"",
                owner.username
            )
        }),
        other => other.into(),
    }
}

/// Parameter values by name, as builds and workspaces keep them.
type Values = BTreeMap<String, String>;

/// What a new workspace is created with.
#[derive(Debug, Clone)]
pub(crate) struct Creation {
    /// The preset asked for, or the one whose values are exactly the
    /// requested ones.
    pub(crate) preset: Option<PresetDefinition>,
    /// Whether `values` are exactly what the preset builds alone (its values
    /// and the defaults, as a prebuilt workspace of it has): only then can
    /// a prebuilt workspace stand for this one.
    // Read by the claim of a prebuilt workspace (issue 12), which comes next.
    #[allow(dead_code)]
    pub(crate) exact: bool,
    /// The first build's values.
    pub(crate) values: Values,
    /// What the workspace keeps of them.
    pub(crate) kept: Values,
}

/// The preset and values of a create. With `preset`, its values fill those
/// not given (a given value must agree with it); without, the version's
/// preset that builds exactly the requested values (the given ones and the
/// defaults), if one does, is the workspace's.
pub(crate) fn resolve_creation(
    version: &TemplateVersion,
    preset: Option<&str>,
    given: &BTreeMap<String, Value>,
) -> Result<Creation, ControlError> {
    let presets = stored_presets(version)?;
    // What each preset builds alone (its values and the defaults): what a
    // prebuilt workspace of it has. A preset leaving a required parameter
    // unset builds nothing alone.
    let built_alone = |preset: &PresetDefinition| {
        let values = with_preset(preset, &BTreeMap::new()).ok()?;
        let (values, _) = resolve_parameters(version, &values, None, CheckKind::Create).ok()?;
        Some(values)
    };
    if let Some(name) = preset {
        let preset = named_preset(version, &presets, name)?;
        let given = with_preset(preset, given)?;
        let (values, kept) = resolve_parameters(version, &given, None, CheckKind::Create)?;
        let exact = built_alone(preset).as_ref() == Some(&values);
        return Ok(Creation {
            preset: Some(preset.clone()),
            exact,
            values,
            kept,
        });
    }
    let (values, kept) = resolve_parameters(version, given, None, CheckKind::Create)?;
    let candidates = presets
        .iter()
        .filter_map(|preset| Some((preset, built_alone(preset)?)));
    let preset = matching_preset(candidates, &values).cloned();
    Ok(Creation {
        exact: preset.is_some(),
        preset,
        values,
        kept,
    })
}

/// Checks the given values against the version's declarations and resolves
/// every value of the build: (this build's values, what the workspace keeps
/// of them). All problems are told at once, in one line. A version pushed
/// before declarations were read has none: its values are taken as given,
/// on top of the workspace's.
pub fn resolve_parameters(
    version: &TemplateVersion,
    given: &BTreeMap<String, Value>,
    previous: Option<&BTreeMap<String, String>>,
    kind: CheckKind,
) -> Result<(Values, Values), ControlError> {
    let (values, kept) = match version.parameters.as_deref() {
        Some(declarations) => {
            let resolved =
                check_parameters(declarations, given, previous, kind).map_err(|problems| {
                    let told: Vec<String> =
                        problems.iter().map(|problem| problem.to_string()).collect();
                    ControlError::BadRequest(format!("invalid parameters: {}", told.join("; ")))
                })?;
            (resolved.build, resolved.keep)
        }
        None => {
            let mut values = previous.cloned().unwrap_or_default();
            for (name, value) in given {
                let text = match value {
                    Value::String(text) => text.clone(),
                    Value::Number(number) => number.to_string(),
                    Value::Bool(flag) => flag.to_string(),
                    other => {
                        let kind = match other {
                            Value::Null => "null",
                            Value::Array(_) => "a list",
                            _ => "an object",
                        };
                        return Err(ControlError::BadRequest(format!(
                            "parameter `{}` is {kind}: a value is a string, number or bool",
                            name.chars().take(64).collect::<String>()
                        )));
                    }
                };
                values.insert(name.clone(), text);
            }
            (values.clone(), values)
        }
    };
    validate_parameters(&values)?;
    Ok((values, kept))
}

/// The most a workspace's parameters may hold, names and values together.
/// They reach every build of the workspace (its delete included) through one
/// environment variable, which the kernel caps at 128 KiB: a workspace whose
/// parameters do not fit could never be built, nor deleted, again.
pub const MAX_PARAMETERS_BYTES: usize = 64 * 1024;

fn validate_parameters(parameters: &BTreeMap<String, String>) -> Result<(), ControlError> {
    for name in parameters.keys() {
        let valid =
            !name.is_empty() && name.chars().count() <= 128 && !name.chars().any(char::is_control);
        if !valid {
            return Err(ControlError::BadRequest(format!(
                "parameter name `{}` must be 1 to 128 characters without control characters",
                name.chars()
                    .filter(|c| !c.is_control())
                    .take(64)
                    .collect::<String>()
            )));
        }
    }
    let total: usize = parameters
        .iter()
        .map(|(name, value)| name.len() + value.len())
        .sum();
    if total > MAX_PARAMETERS_BYTES {
        return Err(ControlError::BadRequest(format!(
            "the parameters hold {} KiB; at most {} KiB (names and values together) can reach a build",
            total.div_ceil(1024),
            MAX_PARAMETERS_BYTES / 1024
        )));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    //! The create path's choice of preset (the door's answers are in
    //! tests/presets.rs): whether a create is exactly what a prebuilt
    //! workspace of its preset has.
    use super::*;

    #[test]
    fn a_create_is_exact_when_its_values_are_the_preset_s_alone() {
        let declarations = crate::parameters::template_declarations_from_plan(include_bytes!(
            "../../../parameters/tests/fixtures/template-import/plan.json"
        ))
        .unwrap();
        let version = TemplateVersion {
            id: "v".into(),
            template_id: "t".into(),
            template_name: "base".into(),
            number: 1,
            active: true,
            message: String::new(),
            created_by: "u".into(),
            archive_sha256: String::new(),
            validation_ok: true,
            validation_message: String::new(),
            parameters: Some(declarations.parameters),
            presets: Some(serde_json::to_string(&declarations.presets).unwrap()),
            created_at: 0,
        };
        let given =
            |value: Value| -> BTreeMap<String, Value> { serde_json::from_value(value).unwrap() };
        let cases = [
            (
                Some("small"),
                given(serde_json::json!({})),
                Some("small"),
                true,
            ),
            (
                Some("small"),
                given(serde_json::json!({"debug": "true"})),
                Some("small"),
                false,
            ),
            (
                None,
                given(serde_json::json!({"project": "demo", "replicas": 1})),
                Some("small"),
                true,
            ),
            (
                None,
                given(serde_json::json!({"project": "x", "replicas": 1})),
                None,
                false,
            ),
        ];
        for (asked, given, preset, exact) in cases {
            let creation = resolve_creation(&version, asked, &given).unwrap();
            assert_eq!(
                (creation.preset.map(|p| p.name).as_deref(), creation.exact),
                (preset, exact),
                "{asked:?} {given:?}"
            );
        }
    }
}
