//! Workspaces: creation (whose first build goes through the door in
//! `builds/`), finding one by reference, what users see of one (its status
//! and agent health computed at read time), lists, its use (`activity.rs`),
//! and the way out for a workspace no build can delete (`orphan`).
//!
//! A service of its own (`Control::workspaces()`): it holds the store, the
//! clock, the agents' timeouts and the handles of the templates, the door,
//! retained resources, the build log and the audit log, and nothing else of
//! the control plane. Every entry that takes a person's reference to a
//! workspace finds it here ([`Workspaces::resolve`]), with whether they may
//! act on it.

mod activity;
mod sharing;

pub use activity::ACTIVITY_THROTTLE;
pub use sharing::Sharing;

use std::collections::BTreeMap;
use std::sync::Arc;

use abode_runner::{LogLevel, LogStage};
use abode_store::{
    page_size, Agent, Build, BuildReason, BuildStatus, Page, StoreError, SystemActor, Transition,
    Workspace, WorkspaceFilter, WorkspaceSummary,
};

use crate::audit::{workspace_event, Audit};
use crate::authz::{self, Action, Scope};
use crate::builds::{BuildOrder, BuildTarget, VersionChoice};
use crate::error::or_not_found;
use crate::retained::Retained;
use crate::state;
use crate::validate_name;
use crate::workspace_status;
use crate::Actor;
use crate::AgentHealth;
use crate::AgentStatus;
use crate::Caller;
use crate::ControlError;
use crate::WorkspaceStatus;
use crate::{AgentTimeouts, BuildLog, Builds, Clock, Templates};
use abode_store::Store;

/// A workspace with what users need to see about it, computed at read time.
#[derive(Debug, Clone)]
pub struct WorkspaceView {
    pub workspace: Workspace,
    pub latest_build: Build,
    pub status: WorkspaceStatus,
    pub agent: AgentHealth,
    pub healthy: bool,
    /// The workspace's state lock when a build whose holder was lost keeps
    /// it (new builds wait).
    pub locked_by_lost_holder: Option<abode_store::LostLock>,
    /// Listed for a person because it is shared with them.
    pub shared: bool,
}

/// Which workspaces a list page shows (docs/api.md, `GET /workspaces`).
#[derive(Debug, Clone, Default)]
pub struct WorkspaceQuery {
    /// Everyone's workspaces, for those who may read them (owners,
    /// template-admins, auditors); others see their own.
    pub all: bool,
    pub include_deleted: bool,
    /// Only this owner's (a username).
    pub owner: Option<String>,
    pub template: Option<String>,
    pub status: Option<WorkspaceStatus>,
    /// The `next` of the previous page.
    pub after: Option<String>,
    pub limit: Option<i64>,
}

/// A workspace removed without running Terraform, and the resources its last
/// state names (they may still exist).
#[derive(Debug, Clone)]
pub struct Orphaned {
    pub workspace: Workspace,
    pub resources: Vec<String>,
}

/// The workspaces; cheap to clone.
#[derive(Clone)]
pub struct Workspaces {
    inner: Arc<WorkspacesParts>,
}

/// What [`Workspaces`] holds.
pub(crate) struct WorkspacesParts {
    pub(crate) store: Store,
    pub(crate) clock: Clock,
    /// When an agent counts as connected and alive, for a view's health.
    pub(crate) agent_timeouts: AgentTimeouts,
    pub(crate) templates: Arc<Templates>,
    pub(crate) builds: Builds,
    pub(crate) retained: Arc<Retained>,
    pub(crate) build_log: BuildLog,
    pub(crate) audit: Audit,
    /// Told when a share is removed: open connections check again.
    pub(crate) identity: Arc<crate::Identity>,
}

impl Workspaces {
    pub(crate) fn new(parts: WorkspacesParts) -> Workspaces {
        Workspaces {
            inner: Arc::new(parts),
        }
    }

    /// A person's new workspace on a template's active version, with one of
    /// its presets if `preset` names one (else the preset whose values are
    /// exactly the requested ones, if any); its first build goes through the
    /// door.
    pub async fn create(
        &self,
        caller: &Caller,
        name: &str,
        template_name: &str,
        preset: Option<&str>,
        parameters: BTreeMap<String, serde_json::Value>,
    ) -> Result<(WorkspaceView, Build), ControlError> {
        self.create_adopting(caller, name, template_name, preset, parameters, &[])
            .await
    }

    /// A new workspace whose first build imports the caller's retained
    /// resources `adopt` (record ids) at their addresses (`abode create
    /// --adopt`).
    pub async fn create_adopting(
        &self,
        caller: &Caller,
        name: &str,
        template_name: &str,
        preset: Option<&str>,
        parameters: BTreeMap<String, serde_json::Value>,
        adopt: &[String],
    ) -> Result<(WorkspaceView, Build), ControlError> {
        caller.authorize(Action::WorkspaceCreate, Some(&caller.user.id))?;
        validate_name("workspace name", name)?;
        let template = self.inner.templates.template(template_name).await?;
        // Only a workspace that does not exist yet adopts (an existing one's
        // next start would import unasked), and a new one adopts only what
        // its own create asked for: what an earlier workspace of that name
        // reserved and never imported is released.
        let exists = match self
            .inner
            .store
            .workspace_by_owner_and_name(&caller.user.id, name)
            .await
        {
            Ok(workspace) => !workspace.deleted,
            Err(StoreError::NotFound(_)) => false,
            Err(other) => return Err(other.into()),
        };
        if exists && !adopt.is_empty() {
            return Err(ControlError::Conflict(format!(
                "workspace \"{name}\" already exists; adopt into a new workspace"
            )));
        }
        if !exists {
            self.inner
                .store
                .release_adoption(&crate::retention::adopt_key(&caller.user.id, name))
                .await?;
        }
        if !adopt.is_empty() {
            self.inner
                .retained
                .reserve_for_adoption(caller, adopt, name)
                .await?;
        }
        let build = self
            .inner
            .builds
            .request(
                BuildTarget::New {
                    name: name.to_string(),
                    owner: caller.user.clone(),
                    template,
                    preset: preset.map(str::to_string),
                },
                BuildOrder {
                    actor: Actor::User(caller.user.clone()),
                    request_id: caller.request_id.clone(),
                    transition: Transition::Start,
                    version: VersionChoice::Active,
                    reason: BuildReason::Initiator,
                    parameters,
                    retention: None,
                    rename_to: None,
                    then_start: false,
                },
            )
            .await?;
        let workspace = self
            .inner
            .store
            .workspace_by_id(&build.workspace_id)
            .await?;
        let view = self.view(workspace).await?;
        Ok((view, build))
    }

    /// Finds a workspace by `name` (the caller's) or `owner/name` for
    /// `action`, which the caller must be allowed on it. A caller who may not
    /// do `action` to, or read, other people's workspaces is refused a
    /// reference to someone else's before anything is looked up: the answer
    /// says nothing about whether it exists.
    pub async fn resolve(
        &self,
        caller: &Caller,
        reference: &str,
        action: Action,
    ) -> Result<Workspace, ControlError> {
        let (owner, name) = match reference.split_once('/') {
            Some((owner, name)) => (owner, name),
            None => (caller.user.username.as_str(), reference),
        };
        authz::scope_reaches(&caller.scope, action)?;
        let not_found = || ControlError::NotFound(format!("workspace \"{reference}\" not found"));
        // A pool's workspace is nobody's data: deleting it is a permission
        // of its own, granted without the right to delete people's.
        let action =
            if owner == SystemActor::Prebuilds.username() && action == Action::WorkspaceDelete {
                Action::PrebuiltWorkspaceDelete
            } else {
                action
            };
        // The roles alone (a token's scope may name this very workspace);
        // refused, a share of the workspace may still allow it.
        let by_roles = match owner == caller.user.username {
            true => Ok(()),
            false => authz::authorize_roles(&caller.subject(), action, None).and(
                authz::authorize_roles(&caller.subject(), Action::WorkspaceRead, None),
            ),
        };
        let store = &self.inner.store;
        let owner_id = if owner == caller.user.username {
            caller.user.id.clone()
        } else {
            match store.user_by_name(owner).await {
                Ok(user) => user.id,
                Err(StoreError::NotFound(_)) => {
                    return Err(by_roles.err().map_or_else(not_found, Into::into))
                }
                Err(other) => return Err(other.into()),
            }
        };
        let found = store.workspace_by_owner_and_name(&owner_id, name).await;
        let (workspace, shared) = match (found, by_roles) {
            (Ok(workspace), Err(refused)) => {
                // Not shared with them: refused as if it did not exist.
                match store.share_role_of(&workspace.id, &caller.user.id).await? {
                    Some(role) => (workspace, Some(role)),
                    None => return Err(refused.into()),
                }
            }
            (Err(StoreError::NotFound(_)), Err(refused)) => return Err(refused.into()),
            (found, _) => (
                or_not_found(found, || format!("workspace \"{reference}\" not found"))?,
                None,
            ),
        };
        authz::authorize_shared_workspace(
            &caller.subject(),
            action,
            &workspace.owner_id,
            &workspace.id,
            shared,
        )?;
        // Its owner acting on it is using it (the lifecycle's activity).
        self.note_owner_use(caller, &workspace, action).await;
        Ok(workspace)
    }

    /// The view of a workspace the caller may read.
    pub async fn get(
        &self,
        caller: &Caller,
        reference: &str,
    ) -> Result<WorkspaceView, ControlError> {
        let workspace = self
            .resolve(caller, reference, Action::WorkspaceRead)
            .await?;
        // Shared with the caller, as `list` marks it (not for its owner).
        let shared = workspace.owner_id != caller.user.id
            && self
                .inner
                .store
                .share_role_of(&workspace.id, &caller.user.id)
                .await?
                .is_some();
        let mut view = self.view(workspace).await?;
        if shared {
            // A sharee sees the parameters, not the values its template
            // calls sensitive.
            let version = self
                .inner
                .store
                .template_version_by_id(&view.workspace.template_version_id)
                .await?;
            let sensitive = version.parameters.unwrap_or_default();
            view.workspace.parameters.retain(|name, _| {
                !sensitive
                    .iter()
                    .any(|definition| definition.sensitive && definition.name == *name)
            });
        }
        Ok(WorkspaceView { shared, ..view })
    }

    /// The last report of unsaved work of a workspace the caller was
    /// allowed to read (`get`'s), with its age now.
    pub async fn unsaved(
        &self,
        workspace: &Workspace,
    ) -> Result<Option<abode_sdk::UnsavedReport>, ControlError> {
        crate::unsaved::last_report(&self.inner.store, &self.inner.clock, &workspace.id).await
    }

    /// What the agents of a workspace the caller was allowed to read
    /// (`get`'s) last said of their home volume, with its age now.
    pub async fn disk_usage(
        &self,
        workspace: &Workspace,
    ) -> Result<Vec<abode_sdk::DiskUsage>, ControlError> {
        crate::disk::usage(&self.inner.store, &self.inner.clock, &workspace.id).await
    }

    /// The scripts of the workspace's agents with their latest run
    /// (`scripts.rs`); whoever may read the workspace may list them.
    pub async fn scripts(
        &self,
        caller: &Caller,
        reference: &str,
    ) -> Result<Vec<abode_sdk::WorkspaceScript>, ControlError> {
        let workspace = self
            .resolve(caller, reference, Action::WorkspaceRead)
            .await?;
        crate::scripts::of_workspace(&self.inner.store, &workspace.id).await
    }

    /// The end of the output of a script's latest run. A script of another
    /// agent, or one that never ran, is not found.
    pub async fn script_log(
        &self,
        caller: &Caller,
        reference: &str,
        agent: &str,
        script: &str,
    ) -> Result<String, ControlError> {
        let workspace = self
            .resolve(caller, reference, Action::WorkspaceRead)
            .await?;
        self.inner
            .store
            .script_run_log(&workspace.id, agent, script)
            .await?
            .ok_or_else(|| {
                ControlError::NotFound(format!(
                    "agent {agent} of workspace {} has not run a script `{script}`",
                    workspace.name
                ))
            })
    }

    /// Asks the workspace's agent for a fresh report of unsaved work (its
    /// next heartbeat's answer tells it); whoever may read the workspace
    /// may ask. Only a running agent answers.
    pub async fn request_unsaved_scan(
        &self,
        caller: &Caller,
        reference: &str,
    ) -> Result<(), ControlError> {
        let workspace = self
            .resolve(caller, reference, Action::WorkspaceRead)
            .await?;
        self.inner.store.request_unsaved_scan(&workspace.id).await?;
        Ok(())
    }

    /// A delete of `workspace` judged against its last report of unsaved work.
    pub(crate) async fn judge_unsaved(
        &self,
        workspace: &Workspace,
        consent: &crate::UnsavedConsent,
    ) -> Result<crate::unsaved::UnsavedVerdict, ControlError> {
        crate::unsaved::judge_delete(&self.inner.store, &self.inner.clock, &workspace.id, consent)
            .await
    }

    /// One page of workspaces, read in one query with what their views need
    /// (latest build, newest finished build, agents): a list's cost does not
    /// grow with the number of workspaces on it.
    pub async fn list(
        &self,
        caller: &Caller,
        query: &WorkspaceQuery,
    ) -> Result<Page<WorkspaceView>, ControlError> {
        // One's own list holds what is shared with one too.
        let owner_id = match authz::widest_scope(&caller.subject(), Action::WorkspaceRead) {
            Some(Scope::Any) if query.all => None,
            _ => {
                caller.authorize(Action::WorkspaceRead, Some(&caller.user.id))?;
                Some(caller.user.id.clone())
            }
        };
        let include_shared = owner_id.is_some();
        let page = self
            .inner
            .store
            .list_workspace_page(&WorkspaceFilter {
                include_shared,
                owner_id,
                owner_name: query.owner.clone(),
                template: query.template.clone(),
                latest_build: query.status.map(workspace_status::latest_build_for),
                include_deleted: query.include_deleted,
                // Prebuilt workspaces are the platform's, not people's:
                // listed only when their owner is asked for by name.
                exclude_system_owners: query.owner.is_none(),
                after: query.after.clone(),
                limit: page_size(query.limit),
            })
            .await?;
        let now = self.inner.clock.now_ms();
        Ok(Page {
            items: page
                .items
                .into_iter()
                .map(|summary| {
                    let shared = include_shared && summary.workspace.owner_id != caller.user.id;
                    let mut view = self.summary_view(summary, now);
                    if shared {
                        // Which are sensitive is the version's to say:
                        // `get` shows a sharee the others.
                        view.workspace.parameters.clear();
                    }
                    WorkspaceView { shared, ..view }
                })
                .collect(),
            next: page.next,
        })
    }

    /// The view of a listed workspace: the same rules as [`Self::view`], on
    /// what the page's query read.
    fn summary_view(&self, summary: WorkspaceSummary, now: i64) -> WorkspaceView {
        let WorkspaceSummary {
            workspace,
            latest_build,
            settled,
            agents,
            lost_lock,
        } = summary;
        let status = workspace_status::workspace_status(&latest_build);
        // As in `view`: the newest finished build speaks for the agents
        // (the latest one when none has finished).
        let (settled_status, finished_at) = match settled {
            Some(settled) if !latest_build.status.is_final() => (
                workspace_status::status_of(settled.status, settled.transition),
                settled.finished_at,
            ),
            _ => (status, latest_build.finished_at),
        };
        let agent = workspace_status::agent_health_after(
            settled_status,
            finished_at,
            &agents,
            now,
            self.inner.agent_timeouts,
        );
        let healthy = status == WorkspaceStatus::Running
            && matches!(agent.status, AgentStatus::Ready | AgentStatus::None);
        WorkspaceView {
            workspace,
            latest_build,
            status,
            agent,
            healthy,
            locked_by_lost_holder: lost_lock,
            shared: false,
        }
    }

    pub(crate) async fn view(&self, workspace: Workspace) -> Result<WorkspaceView, ControlError> {
        let latest_build = self.inner.store.latest_build(&workspace.id).await?;
        let agents: Vec<Agent> = self.inner.store.agents_of_workspace(&workspace.id).await?;
        let status = workspace_status::workspace_status(&latest_build);
        // While a build is queued, running or held, the infrastructure is still
        // what the last finished build left: its agent speaks for it.
        let settled = if latest_build.status.is_final() {
            latest_build.clone()
        } else {
            self.inner
                .store
                .list_builds(&workspace.id)
                .await?
                .into_iter()
                .find(|build| build.status.is_final())
                .unwrap_or_else(|| latest_build.clone())
        };
        let agent = workspace_status::agent_health(
            &settled,
            &agents,
            self.inner.clock.now_ms(),
            self.inner.agent_timeouts,
        );
        let healthy = status == WorkspaceStatus::Running
            && matches!(agent.status, AgentStatus::Ready | AgentStatus::None);
        let locked_by_lost_holder = self
            .inner
            .store
            .state_lock_of_workspace(&workspace.id)
            .await?
            .and_then(|lock| lock.lost());
        Ok(WorkspaceView {
            workspace,
            latest_build,
            status,
            agent,
            healthy,
            locked_by_lost_holder,
            shared: false,
        })
    }

    /// Removes a workspace without running Terraform (`workspace.orphan`): the way
    /// out for a workspace no build can delete any more (a template that no
    /// longer plans, a provider that is gone). A held build is canceled; a
    /// running one must be canceled first. Its last state stays readable
    /// through [`Workspaces::state`]; the answer lists the resources
    /// of that state, which may still exist and are now nobody's.
    pub async fn orphan(&self, caller: &Caller, reference: &str) -> Result<Orphaned, ControlError> {
        let workspace = self
            .resolve(caller, reference, Action::WorkspaceOrphan)
            .await?;
        let target = format!("{}/{}", workspace.owner_name, workspace.name);
        if workspace.deleted {
            return Err(ControlError::Conflict(format!(
                "workspace \"{target}\" was already deleted"
            )));
        }
        let latest = self.inner.store.latest_build(&workspace.id).await?;
        if latest.status == BuildStatus::AwaitingConfirmation {
            let message = format!(
                "canceled by {}: the workspace was removed without running Terraform",
                caller.user.username
            );
            self.inner
                .store
                .cancel_pending_build(&latest.id, &message)
                .await?;
            self.inner
                .build_log
                .note(&latest.id, &LogStage::GUARD, LogLevel::Warn, &message)
                .await;
        } else if !latest.status.is_final() {
            return Err(ControlError::Conflict(format!(
                "workspace \"{target}\" has build #{} {}; cancel it first (abode builds cancel {target} {})",
                latest.number, latest.status, latest.number
            )));
        }
        let state = self.inner.store.state(&workspace.id).await?;
        let resources = match state.as_deref() {
            Some(state) => managed_resources(state).map_err(|error| {
                ControlError::Internal(format!("the stored state is not valid JSON: {error}"))
            })?,
            None => Vec::new(),
        };
        self.inner
            .store
            .replace_agents(&workspace.id, &latest.id, &[])
            .await?;
        self.inner
            .store
            .mark_workspace_deleted(&workspace.id)
            .await?;
        self.inner
            .audit
            .record(&workspace_event(
                caller,
                &workspace.id,
                "workspace.orphan",
                &target,
                "success",
                Some(format!("resources={}", resources.len())),
            ))
            .await;
        let workspace = self.inner.store.workspace_by_id(&workspace.id).await?;
        Ok(Orphaned {
            workspace,
            resources,
        })
    }

    /// The workspace's last Terraform state (`workspace.state_read`; audited): how an
    /// operator finds what an orphaned workspace left behind. It holds every
    /// secret of the workspace, so it is the one answer that carries them.
    pub async fn state(&self, caller: &Caller, reference: &str) -> Result<Vec<u8>, ControlError> {
        let workspace = self
            .resolve(caller, reference, Action::WorkspaceStateRead)
            .await?;
        let target = format!("{}/{}", workspace.owner_name, workspace.name);
        let state = self
            .inner
            .store
            .state(&workspace.id)
            .await?
            .ok_or_else(|| {
                ControlError::NotFound(format!("workspace \"{target}\" has no stored state"))
            })?;
        self.inner
            .audit
            .record(&workspace_event(
                caller,
                &workspace.id,
                "workspace.state_read",
                &target,
                "success",
                None,
            ))
            .await;
        Ok(state)
    }
}

/// The addresses of a state's managed resource instances
/// (`module.m.type.name["key"]`).
fn managed_resources(state: &[u8]) -> Result<Vec<String>, serde_json::Error> {
    let state: serde_json::Value = serde_json::from_slice(state)?;
    Ok(state::managed_instances(&state)
        .iter()
        .map(state::Instance::address)
        .collect())
}
