//! Abode's control plane: the domain rules of users, templates, workspaces and
//! builds, and the embedded provisioners that run builds through Terraform.
//!
//! The HTTP layer (`abode-api`) only translates requests into calls on
//! [`Control`] and its answers into JSON; every rule (who may do what, which
//! build may start, what a workspace's status is) lives here, and every byte
//! stored goes through `abode-store`.

mod archive;
mod error;
mod hashing;
mod identity;
pub mod lifecycle;
pub mod parameters;
mod provisioner;
mod recovery;
mod secrets;
mod state;
mod workdir;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abode_store::{
    page_size, Agent, AuditEvent, AuditFilter, Build, BuildStatus, LogLine, NewAuditEvent,
    NewBuild, NewTemplateVersion, NewUser, NewWorkspace, Page, Protection, SavedPlan, Store,
    StoreError, Template, TemplateVersion, Transition, User, Workspace, WorkspaceFilter,
    WorkspaceSummary,
};
use tokio::sync::{watch, Notify};

pub use archive::{MAX_ENTRIES, MAX_UNPACKED_BYTES};
use error::or_not_found;
pub use error::ControlError;
pub use hashing::default_threads as default_hashing_threads;
pub use identity::SESSION_EXPIRED;
pub use lifecycle::{AgentHealth, AgentStatus, AgentTimeouts, WorkspaceStatus};
pub use recovery::Recovered;
pub use secrets::token_hash;

/// Roles, from most to least powerful.
pub const ROLE_OWNER: &str = "owner";
pub const ROLE_TEMPLATE_ADMIN: &str = "template-admin";
pub const ROLE_MEMBER: &str = "member";

const MIN_PASSWORD_LENGTH: usize = 8;

/// How the control plane runs; everything has a default fit for one machine.
#[derive(Debug, Clone)]
pub struct Config {
    /// Root of the server's files: the database lives elsewhere, but volumes,
    /// build work dirs and process logs live under here.
    pub data_dir: PathBuf,
    /// The URL agents call back (`ABODE_AGENT_URL` in builds).
    pub access_url: String,
    /// The filesystem mirror holding the abode provider, if installed.
    pub provider_mirror: Option<PathBuf>,
    /// The program `abode_agent.init_script` starts; `None`: the provider's own.
    pub agent_binary: Option<PathBuf>,
    pub agent_timeouts: AgentTimeouts,
    pub agent_heartbeat_interval: Duration,
    /// How long a canceled Terraform gets after SIGINT before it is killed.
    pub cancel_grace: Duration,
    /// How long a build held by the guard waits for a confirmation.
    pub confirmation_timeout: Duration,
    /// What Terraform runs get of the server's environment (see
    /// `abode_terraform::run::PassedEnv`): by default only what Terraform
    /// needs to run; the build's own variables come on top.
    pub terraform_env: Vec<(String, String)>,
    /// How many of each workspace's newest builds keep their plan JSON (it
    /// can hold secrets, and is large); held builds always keep theirs.
    pub plan_retention: usize,
    /// A session ends after this long without a request...
    pub session_idle_timeout: Duration,
    /// ...and this long after its login, whatever its use.
    pub session_max_lifetime: Duration,
    /// The longest (and default) lifetime of an API token.
    pub api_token_max_lifetime: Duration,
    /// Failed logins per username or client address within a minute after
    /// which logins are refused until the minute ends; 0: no limit.
    pub login_failures_per_minute: u32,
    /// Threads that hash and check passwords (each uses ~19 MiB while it does).
    pub hashing_threads: usize,
    /// How long a password request waits for a hashing thread before it is
    /// refused as busy.
    pub hashing_wait: Duration,
}

impl Config {
    pub fn new(data_dir: PathBuf, access_url: String) -> Config {
        Config {
            data_dir,
            access_url,
            provider_mirror: None,
            agent_binary: None,
            agent_timeouts: AgentTimeouts {
                connect: Duration::from_secs(30),
                heartbeat: Duration::from_secs(15),
            },
            agent_heartbeat_interval: Duration::from_secs(5),
            cancel_grace: Duration::from_secs(30),
            confirmation_timeout: Duration::from_secs(24 * 60 * 60),
            terraform_env: abode_terraform::run::PassedEnv::default().from_process(),
            plan_retention: 20,
            session_idle_timeout: Duration::from_secs(24 * 60 * 60),
            session_max_lifetime: Duration::from_secs(30 * 24 * 60 * 60),
            api_token_max_lifetime: Duration::from_secs(365 * 24 * 60 * 60),
            login_failures_per_minute: 10,
            hashing_threads: hashing::default_threads(),
            hashing_wait: Duration::from_secs(2),
        }
    }

    pub fn volumes_dir(&self) -> PathBuf {
        self.data_dir.join("volumes")
    }

    pub fn process_logs_dir(&self) -> PathBuf {
        self.data_dir.join("process-logs")
    }

    /// Private per-build and per-push working directories.
    pub fn work_dir(&self) -> PathBuf {
        self.data_dir.join("work")
    }
}

/// Who is asking, for permission checks and the audit log.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user: User,
    pub request_id: Option<String>,
}

impl Caller {
    fn is_owner(&self) -> bool {
        self.user.role == ROLE_OWNER
    }

    fn is_admin(&self) -> bool {
        self.user.role == ROLE_OWNER || self.user.role == ROLE_TEMPLATE_ADMIN
    }
}

/// A workspace with what users need to see about it, computed at read time.
#[derive(Debug, Clone)]
pub struct WorkspaceView {
    pub workspace: Workspace,
    pub latest_build: Build,
    pub status: WorkspaceStatus,
    pub agent: AgentHealth,
    pub healthy: bool,
}

/// Which workspaces a list page shows (docs/api.md, `GET /workspaces`).
#[derive(Debug, Clone, Default)]
pub struct WorkspaceQuery {
    /// Everyone's workspaces (owners and template admins; others see their own).
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

/// Which audit events a page shows (docs/api.md, `GET /audit`).
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    /// A workspace reference (`name` or `owner/name`), resolved as the caller sees it.
    pub workspace: Option<String>,
    /// An exact target, whatever its type.
    pub target: Option<String>,
    pub actor: Option<String>,
    pub action: Option<String>,
    /// Unix ms, inclusive.
    pub since: Option<i64>,
    /// Unix ms, exclusive.
    pub until: Option<i64>,
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

/// A page of build log lines.
#[derive(Debug, Clone)]
pub struct LogPage {
    pub lines: Vec<LogLine>,
    pub status: BuildStatus,
    pub done: bool,
}

/// What a build request asks for.
#[derive(Debug, Clone)]
pub struct BuildRequest {
    pub transition: Transition,
    pub template_version: Option<i64>,
    pub update: bool,
}

/// The control plane; cheap to clone.
#[derive(Clone)]
pub struct Control {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    config: Config,
    /// Wakes idle provisioners when a job is queued.
    jobs_queued: Notify,
    /// Cancel switches of the builds running in this process.
    running: Mutex<HashMap<String, watch::Sender<bool>>>,
    /// Wakes log followers when a line is written or a build ends.
    log_written: Notify,
    /// Failed logins per username and client address.
    throttle: identity::LoginThrottle,
    /// Where passwords are hashed and checked, a few at a time.
    hashing: hashing::HashingPool,
}

impl Control {
    pub fn new(store: Store, config: Config) -> Control {
        let throttle =
            identity::LoginThrottle::new(config.login_failures_per_minute, Duration::from_secs(60));
        let hashing = hashing::HashingPool::new(config.hashing_threads, config.hashing_wait);
        Control {
            inner: Arc::new(Inner {
                throttle,
                hashing,
                store,
                config,
                jobs_queued: Notify::new(),
                running: Mutex::new(HashMap::new()),
                log_written: Notify::new(),
            }),
        }
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Takes over the builds a dead server left running (see `recovery`):
    /// each is followed until no Terraform of it runs, its state stored, and
    /// it ends failed with what happened. Old work dirs are cleared. The
    /// followers stop, interrupting what they follow, when `shutdown` turns
    /// true.
    pub async fn recover(
        &self,
        shutdown: watch::Receiver<bool>,
    ) -> Result<recovery::Recovered, ControlError> {
        recovery::recover(self, shutdown).await
    }

    /// Starts `count` provisioner workers; they stop when `shutdown` turns true,
    /// interrupting the builds they run. Wait on the handles for a clean stop.
    pub fn start_provisioners(
        &self,
        count: usize,
        shutdown: watch::Receiver<bool>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut handles: Vec<tokio::task::JoinHandle<()>> = (0..count)
            .map(|index| {
                let control = self.clone();
                let shutdown = shutdown.clone();
                tokio::spawn(provisioner::worker(
                    control,
                    format!("embedded-{index}"),
                    shutdown,
                ))
            })
            .collect();
        handles.push(tokio::spawn(provisioner::expiry_sweeper(
            self.clone(),
            shutdown,
        )));
        handles
    }

    // ---- users and sessions ----

    pub async fn create_first_user(
        &self,
        username: &str,
        email: &str,
        password: &str,
        request_id: Option<String>,
    ) -> Result<(User, String), ControlError> {
        validate_name("username", username)?;
        validate_email(email)?;
        validate_password(password)?;
        let password_hash = self.hash_password(password).await?;
        let user = match self
            .inner
            .store
            .create_first_user(&NewUser {
                username: username.into(),
                email: email.into(),
                role: ROLE_OWNER.into(),
                password_hash,
            })
            .await
        {
            Err(StoreError::Conflict(_)) => {
                return Err(ControlError::Conflict(
                    "the first user already exists; log in instead".into(),
                ))
            }
            other => other?,
        };
        let token = self.issue_token(&user, request_id.clone()).await?;
        self.audit(
            Some(&user),
            request_id,
            "user.create",
            "user",
            username,
            "success",
            None,
        )
        .await;
        Ok((user, token))
    }

    /// Hashes a new password on the bounded hashing pool.
    async fn hash_password(&self, password: &str) -> Result<String, ControlError> {
        let password = password.to_string();
        self.inner
            .hashing
            .run(move |memory| secrets::hash_password(&password, memory))
            .await?
    }

    pub async fn create_user(
        &self,
        caller: &Caller,
        username: &str,
        email: &str,
        password: &str,
        role: &str,
    ) -> Result<User, ControlError> {
        if !caller.is_owner() {
            return Err(ControlError::Forbidden(
                "only owners can create users".into(),
            ));
        }
        validate_name("username", username)?;
        validate_email(email)?;
        validate_password(password)?;
        if ![ROLE_OWNER, ROLE_TEMPLATE_ADMIN, ROLE_MEMBER].contains(&role) {
            return Err(ControlError::BadRequest(format!(
                "unknown role `{role}`: use owner, template-admin or member"
            )));
        }
        let password_hash = self.hash_password(password).await?;
        let user = match self
            .inner
            .store
            .create_user(&NewUser {
                username: username.into(),
                email: email.into(),
                role: role.into(),
                password_hash,
            })
            .await
        {
            Err(StoreError::Conflict(_)) => {
                return Err(ControlError::Conflict(format!(
                    "username \"{username}\" is taken"
                )))
            }
            other => other?,
        };
        self.audit(
            Some(&caller.user),
            caller.request_id.clone(),
            "user.create",
            "user",
            username,
            "success",
            Some(format!("role={role}")),
        )
        .await;
        Ok(user)
    }

    // ---- templates ----

    /// The longest message a template version keeps.
    pub const MAX_VERSION_MESSAGE_CHARS: usize = 1024;

    /// Whether `caller` may push version `message` of template `name`,
    /// checked before the upload is read: a caller who may not gets the
    /// answer without the server holding their archive.
    pub fn may_push_template(
        &self,
        caller: &Caller,
        name: &str,
        message: &str,
    ) -> Result<(), ControlError> {
        if !caller.is_admin() {
            return Err(ControlError::Forbidden(
                "only owners and template-admins can push templates".into(),
            ));
        }
        validate_name("template name", name)?;
        if message.chars().count() > Self::MAX_VERSION_MESSAGE_CHARS {
            return Err(ControlError::BadRequest(format!(
                "a version message is at most {} characters",
                Self::MAX_VERSION_MESSAGE_CHARS
            )));
        }
        Ok(())
    }

    pub async fn push_template(
        &self,
        caller: &Caller,
        name: &str,
        archive_bytes: Vec<u8>,
        activate: bool,
        message: &str,
    ) -> Result<(Template, TemplateVersion), ControlError> {
        self.may_push_template(caller, name, message)?;
        let validation = provisioner::validate_template(self, &archive_bytes).await;
        let validation_message = match validation {
            Ok(message) => message,
            Err(error) => {
                self.audit(
                    Some(&caller.user),
                    caller.request_id.clone(),
                    "template.push",
                    "template",
                    name,
                    "failure",
                    Some(error.to_string()),
                )
                .await;
                return Err(error);
            }
        };
        let (template, version) = self
            .inner
            .store
            .create_template_version(&NewTemplateVersion {
                template_name: name.into(),
                archive_sha256: secrets::sha256_hex(&archive_bytes),
                archive: archive_bytes,
                message: message.into(),
                created_by: caller.user.id.clone(),
                validation_ok: true,
                validation_message,
                activate,
            })
            .await?;
        self.audit(
            Some(&caller.user),
            caller.request_id.clone(),
            "template.push",
            "template",
            name,
            "success",
            Some(format!(
                "version={} active={}",
                version.number, version.active
            )),
        )
        .await;
        Ok((template, version))
    }

    /// One page of templates, by name.
    pub async fn list_templates(
        &self,
        after: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Page<Template>, ControlError> {
        Ok(self
            .inner
            .store
            .list_template_page(after, page_size(limit))
            .await?)
    }

    /// One page of users, by username; owners only (members need no
    /// directory of everyone).
    pub async fn list_users(
        &self,
        caller: &Caller,
        after: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Page<User>, ControlError> {
        if !caller.is_owner() {
            return Err(ControlError::Forbidden(
                "only owners can list users".to_string(),
            ));
        }
        Ok(self
            .inner
            .store
            .list_user_page(after, page_size(limit))
            .await?)
    }

    pub async fn template(&self, name: &str) -> Result<Template, ControlError> {
        or_not_found(self.inner.store.template_by_name(name).await, || {
            format!("template \"{name}\" not found")
        })
    }

    pub async fn template_versions(
        &self,
        name: &str,
    ) -> Result<Vec<TemplateVersion>, ControlError> {
        let template = self.template(name).await?;
        Ok(self
            .inner
            .store
            .list_template_versions(&template.id)
            .await?)
    }

    pub async fn activate_template_version(
        &self,
        caller: &Caller,
        name: &str,
        number: i64,
    ) -> Result<(Template, TemplateVersion), ControlError> {
        if !caller.is_admin() {
            return Err(ControlError::Forbidden(
                "only owners and template-admins can activate template versions".into(),
            ));
        }
        let template = self.template(name).await?;
        let version = or_not_found(
            self.inner
                .store
                .template_version(&template.id, number)
                .await,
            || format!("template \"{name}\" has no version {number}"),
        )?;
        self.inner
            .store
            .activate_template_version(&template.id, &version.id)
            .await?;
        self.audit(
            Some(&caller.user),
            caller.request_id.clone(),
            "template.activate",
            "template",
            name,
            "success",
            Some(format!("version={number}")),
        )
        .await;
        let template = self.template(name).await?;
        let version = self.inner.store.template_version_by_id(&version.id).await?;
        Ok((template, version))
    }

    // ---- workspaces ----

    pub async fn create_workspace(
        &self,
        caller: &Caller,
        name: &str,
        template_name: &str,
        parameters: BTreeMap<String, String>,
    ) -> Result<(WorkspaceView, Build), ControlError> {
        validate_name("workspace name", name)?;
        validate_parameters(&parameters)?;
        let template = self.template(template_name).await?;
        let version_id = template.active_version_id.clone().ok_or_else(|| {
            ControlError::Conflict(format!(
                "template \"{template_name}\" has no active version"
            ))
        })?;
        let parameters = serde_json::to_string(&parameters)
            .map_err(|error| ControlError::Internal(error.to_string()))?;
        let workspace_id = abode_store::new_id();
        let created = self
            .inner
            .store
            .create_workspace(
                &NewWorkspace {
                    id: workspace_id.clone(),
                    owner_id: caller.user.id.clone(),
                    name: name.into(),
                    template_id: template.id.clone(),
                    template_version_id: version_id.clone(),
                    parameters,
                },
                &NewBuild {
                    id: abode_store::new_id(),
                    workspace_id,
                    transition: Transition::Start,
                    template_version_id: version_id,
                    initiator_id: caller.user.id.clone(),
                    reason: "create".into(),
                },
            )
            .await;
        let (workspace, build) = match created {
            Err(StoreError::Conflict(_)) => {
                return Err(ControlError::Conflict(format!(
                    "you already have a workspace named \"{name}\""
                )))
            }
            other => other?,
        };
        self.inner.jobs_queued.notify_one();
        self.audit_build(caller, &build).await;
        let view = self.view(workspace).await?;
        Ok((view, build))
    }

    /// Finds a workspace by `name` (the caller's) or `owner/name`.
    pub async fn resolve_workspace(
        &self,
        caller: &Caller,
        reference: &str,
    ) -> Result<Workspace, ControlError> {
        let (owner, name) = match reference.split_once('/') {
            Some((owner, name)) => (owner, name),
            None => (caller.user.username.as_str(), reference),
        };
        let not_found = || ControlError::NotFound(format!("workspace \"{reference}\" not found"));
        let owner_user = if owner == caller.user.username {
            caller.user.clone()
        } else {
            if !caller.is_admin() {
                return Err(ControlError::Forbidden(
                    "members can only see their own workspaces".into(),
                ));
            }
            match self.inner.store.user_by_name(owner).await {
                Ok(user) => user,
                Err(StoreError::NotFound(_)) => return Err(not_found()),
                Err(other) => return Err(other.into()),
            }
        };
        or_not_found(
            self.inner
                .store
                .workspace_by_owner_and_name(&owner_user.id, name)
                .await,
            || format!("workspace \"{reference}\" not found"),
        )
    }

    pub async fn workspace(
        &self,
        caller: &Caller,
        reference: &str,
    ) -> Result<WorkspaceView, ControlError> {
        let workspace = self.resolve_workspace(caller, reference).await?;
        self.view(workspace).await
    }

    /// One page of workspaces, read in one query with what their views need
    /// (latest build, newest finished build, agents): a list's cost does not
    /// grow with the number of workspaces on it.
    pub async fn list_workspaces(
        &self,
        caller: &Caller,
        query: &WorkspaceQuery,
    ) -> Result<Page<WorkspaceView>, ControlError> {
        let owner_id = if query.all && caller.is_admin() {
            None
        } else {
            Some(caller.user.id.clone())
        };
        let page = self
            .inner
            .store
            .list_workspace_page(&WorkspaceFilter {
                owner_id,
                owner_name: query.owner.clone(),
                template: query.template.clone(),
                latest_build: query.status.map(lifecycle::latest_build_for),
                include_deleted: query.include_deleted,
                after: query.after.clone(),
                limit: page_size(query.limit),
            })
            .await?;
        let now = abode_store::now_ms();
        Ok(Page {
            items: page
                .items
                .into_iter()
                .map(|summary| self.summary_view(summary, now))
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
        } = summary;
        let status = lifecycle::workspace_status(&latest_build);
        // As in `view`: the newest finished build speaks for the agents
        // (the latest one when none has finished).
        let (settled_status, finished_at) = match settled {
            Some(settled) if !latest_build.status.is_final() => (
                lifecycle::status_of(settled.status, settled.transition),
                settled.finished_at,
            ),
            _ => (status, latest_build.finished_at),
        };
        let agent = lifecycle::agent_health_after(
            settled_status,
            finished_at,
            &agents,
            now,
            self.inner.config.agent_timeouts,
        );
        let healthy = status == WorkspaceStatus::Running
            && matches!(agent.status, AgentStatus::Ready | AgentStatus::None);
        WorkspaceView {
            workspace,
            latest_build,
            status,
            agent,
            healthy,
        }
    }

    async fn view(&self, workspace: Workspace) -> Result<WorkspaceView, ControlError> {
        let latest_build = self.inner.store.latest_build(&workspace.id).await?;
        let agents: Vec<Agent> = self.inner.store.agents_of_workspace(&workspace.id).await?;
        let status = lifecycle::workspace_status(&latest_build);
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
        let agent = lifecycle::agent_health(
            &settled,
            &agents,
            abode_store::now_ms(),
            self.inner.config.agent_timeouts,
        );
        let healthy = status == WorkspaceStatus::Running
            && matches!(agent.status, AgentStatus::Ready | AgentStatus::None);
        Ok(WorkspaceView {
            workspace,
            latest_build,
            status,
            agent,
            healthy,
        })
    }

    // ---- builds ----

    pub async fn start_build(
        &self,
        caller: &Caller,
        reference: &str,
        request: &BuildRequest,
    ) -> Result<Build, ControlError> {
        let workspace = self.resolve_workspace(caller, reference).await?;
        let transition = request.transition;
        let (version_id, reason) = match transition {
            Transition::Start if request.update || request.template_version.is_some() => {
                let template = self.template(&workspace.template_name).await?;
                let version_id = match request.template_version {
                    Some(number) => {
                        or_not_found(
                            self.inner
                                .store
                                .template_version(&template.id, number)
                                .await,
                            || format!("template \"{}\" has no version {number}", template.name),
                        )?
                        .id
                    }
                    None => template.active_version_id.clone().ok_or_else(|| {
                        ControlError::Conflict(format!(
                            "template \"{}\" has no active version",
                            template.name
                        ))
                    })?,
                };
                (version_id, "update")
            }
            _ => (workspace.template_version_id.clone(), transition.as_str()),
        };
        let latest = self.inner.store.latest_build(&workspace.id).await?;
        lifecycle::check_new_build(&workspace, &latest, transition, &version_id)?;
        let created = self
            .inner
            .store
            .create_build(&NewBuild {
                id: abode_store::new_id(),
                workspace_id: workspace.id.clone(),
                transition,
                template_version_id: version_id,
                initiator_id: caller.user.id.clone(),
                reason: reason.into(),
            })
            .await;
        let build = match created {
            Err(StoreError::Conflict(_)) => {
                return Err(ControlError::Conflict(format!(
                "workspace \"{}\" already has a build pending or running; wait for it or cancel it",
                workspace.name
            )))
            }
            Err(StoreError::NotFound(_)) => {
                return Err(ControlError::Conflict(format!(
                    "workspace \"{}\" was deleted",
                    workspace.name
                )))
            }
            other => other?,
        };
        self.inner.jobs_queued.notify_one();
        self.audit_build(caller, &build).await;
        Ok(build)
    }

    /// One page of a workspace's builds, newest first.
    pub async fn builds(
        &self,
        caller: &Caller,
        reference: &str,
        status: Option<BuildStatus>,
        after: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Page<Build>, ControlError> {
        let workspace = self.resolve_workspace(caller, reference).await?;
        Ok(self
            .inner
            .store
            .list_build_page(&workspace.id, status, after, page_size(limit))
            .await?)
    }

    /// `number: None` is the latest build.
    pub async fn build(
        &self,
        caller: &Caller,
        reference: &str,
        number: Option<i64>,
    ) -> Result<Build, ControlError> {
        let workspace = self.resolve_workspace(caller, reference).await?;
        let found = match number {
            Some(number) => {
                self.inner
                    .store
                    .build_by_number(&workspace.id, number)
                    .await
            }
            None => self.inner.store.latest_build(&workspace.id).await,
        };
        or_not_found(found, || match number {
            Some(number) => format!("workspace \"{reference}\" has no build #{number}"),
            None => format!("workspace \"{reference}\" has no build"),
        })
    }

    /// Log lines after `after`; with `wait`, holds until a line arrives, the
    /// build ends or the wait is over.
    pub async fn build_logs(
        &self,
        caller: &Caller,
        reference: &str,
        number: Option<i64>,
        after: i64,
        wait: Duration,
    ) -> Result<LogPage, ControlError> {
        let build = self.build(caller, reference, number).await?;
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Register interest before reading, so a line written in between
            // still wakes this follower.
            let notified = self.inner.log_written.notified();
            let status = self.inner.store.build_by_id(&build.id).await?.status;
            let lines = self.inner.store.logs_after(&build.id, after, 1000).await?;
            // A held build writes nothing more until someone confirms it.
            let done = (status.is_final() || status == BuildStatus::AwaitingConfirmation)
                && lines.len() < 1000;
            if !lines.is_empty() || done || tokio::time::Instant::now() >= deadline {
                return Ok(LogPage {
                    lines,
                    status,
                    done,
                });
            }
            // Followers poll the database at least every second, in case a line
            // was written by another process.
            let _ = tokio::time::timeout_at(
                deadline.min(tokio::time::Instant::now() + Duration::from_secs(1)),
                notified,
            )
            .await;
        }
    }

    pub async fn cancel_build(
        &self,
        caller: &Caller,
        reference: &str,
        number: Option<i64>,
    ) -> Result<Build, ControlError> {
        let build = self.build(caller, reference, number).await?;
        let message = format!("canceled by {}", caller.user.username);
        if build.status.is_final() {
            return Err(ControlError::Conflict(format!(
                "build #{} of workspace \"{}\" already {}",
                build.number, build.workspace_name, build.status
            )));
        }
        if self
            .inner
            .store
            .cancel_pending_build(&build.id, &message)
            .await?
        {
            self.note(&build.id, "setup", "warn", &message).await;
            self.inner.log_written.notify_waiters();
        } else if self.inner.store.cancel_requested(&build.id).await? {
            // Asked already: one cancel, one log line, one audit event.
            return Ok(self.inner.store.build_by_id(&build.id).await?);
        } else {
            self.inner.store.request_cancel(&build.id).await?;
            self.note(
                &build.id,
                "cleanup",
                "warn",
                &format!("{message}; interrupting Terraform"),
            )
            .await;
            if let Ok(running) = self.inner.running.lock() {
                if let Some(switch) = running.get(&build.id) {
                    let _ = switch.send(true);
                }
            }
        }
        self.audit(
            Some(&caller.user),
            caller.request_id.clone(),
            "build.cancel",
            "workspace",
            &format!("{}/{}", build.owner_name, build.workspace_name),
            "success",
            Some(format!("build={}", build.number)),
        )
        .await;
        Ok(self.inner.store.build_by_id(&build.id).await?)
    }

    // ---- guarded builds ----

    /// Applies exactly the saved plan of a held build, once, if `digest` is
    /// that plan's and the workspace's state has not changed since.
    pub async fn confirm_build(
        &self,
        caller: &Caller,
        reference: &str,
        number: Option<i64>,
        digest: &str,
    ) -> Result<Build, ControlError> {
        if digest.trim().is_empty() {
            return Err(ControlError::BadRequest(
                "give the plan digest you reviewed (the build's plan_digest)".into(),
            ));
        }
        // Checked before anything is looked up or audited: what is not a
        // digest (any size, any bytes) is never stored.
        let digest = digest.trim();
        if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ControlError::BadRequest(
                "a plan digest is 64 hexadecimal characters (the build's plan_digest)".into(),
            ));
        }
        let digest = digest.to_ascii_lowercase();
        let digest = digest.as_str();
        let build = self.build(caller, reference, number).await?;
        let target = format!("{}/{}", build.owner_name, build.workspace_name);
        let refuse = |message: String| ControlError::Conflict(message);
        let result = async {
            if build.status != BuildStatus::AwaitingConfirmation {
                let blocked = build.status == BuildStatus::Failed
                    && guard_decision(&build)? == Some(abode_guard::Decision::Block);
                return Err(refuse(if blocked {
                    format!(
                        "build #{} was blocked by the plan guard and can never be confirmed: fix the template or release the protection, then start again",
                        build.number
                    )
                } else {
                    format!(
                        "build #{} of workspace \"{}\" is not awaiting confirmation (it is {})",
                        build.number, build.workspace_name, build.status
                    )
                }));
            }
            // The deadline holds by itself, not only once the sweeper ran.
            if build
                .expires_at
                .is_some_and(|deadline| deadline <= abode_store::now_ms())
            {
                return Err(refuse(format!(
                    "build #{} expired: nobody confirmed it in time; start the build again",
                    build.number
                )));
            }
            let saved = self.inner.store.saved_plan(&build.id).await?.ok_or_else(|| {
                refuse(format!("build #{} has no saved plan any more", build.number))
            })?;
            if saved.digest != digest.trim() {
                return Err(refuse(format!(
                    "the digest does not match the saved plan of build #{}: review the build again and confirm the plan it shows",
                    build.number
                )));
            }
            let state = self.inner.store.state(&build.workspace_id).await?;
            if secrets::sha256_hex(state.as_deref().unwrap_or_default()) != saved.state_digest {
                return Err(refuse(
                    "the workspace changed since this plan was made; start the build again".into(),
                ));
            }
            let audit = audit_event(
                Some(&caller.user),
                caller.request_id.clone(),
                "build.confirm",
                "workspace",
                &target,
                "success",
                Some(format!("build={} digest={}", build.number, saved.digest)),
            );
            if !self
                .inner
                .store
                .confirm_build(&build.id, &saved.digest, &caller.user.id, &audit)
                .await?
            {
                return Err(refuse(format!(
                    "build #{} was already confirmed or canceled",
                    build.number
                )));
            }
            Ok(saved.digest)
        }
        .await;
        match result {
            Ok(digest) => {
                self.inner.jobs_queued.notify_one();
                self.note(
                    &build.id,
                    "guard",
                    "info",
                    &format!(
                        "confirmed by {}: applying the saved plan {digest}",
                        caller.user.username
                    ),
                )
                .await;
                Ok(self.inner.store.build_by_id(&build.id).await?)
            }
            Err(error) => {
                self.audit(
                    Some(&caller.user),
                    caller.request_id.clone(),
                    "build.confirm",
                    "workspace",
                    &target,
                    "failure",
                    Some(format!(
                        "build={} digest={} reason={error}",
                        build.number,
                        digest.trim()
                    )),
                )
                .await;
                Err(error)
            }
        }
    }

    /// Records that the guard held a build, with its saved plan.
    pub(crate) async fn hold_build(&self, build_id: &str, plan: SavedPlan) {
        let expires_at = abode_store::now_ms()
            + i64::try_from(self.inner.config.confirmation_timeout.as_millis())
                .unwrap_or(i64::MAX / 2);
        let digest = plan.digest.clone();
        match self
            .inner
            .store
            .hold_build(build_id, &plan, expires_at)
            .await
        {
            Ok(true) => {
                if let Ok(build) = self.inner.store.build_by_id(build_id).await {
                    self.audit_system(
                        "build.held",
                        &build,
                        Some(format!("build={} digest={digest}", build.number)),
                    )
                    .await;
                }
            }
            Ok(false) => {}
            Err(error) => {
                tracing::error!(build = %build_id, %error, "cannot hold a build");
                let _ = self
                    .inner
                    .store
                    .finish_build(
                        build_id,
                        BuildStatus::Failed,
                        Some("cannot save the plan for confirmation"),
                    )
                    .await;
            }
        }
    }

    /// Ends held builds whose confirmation time ran out.
    pub async fn expire_held_builds(&self) {
        self.expire_held_builds_at(abode_store::now_ms()).await;
    }

    /// Ends held builds whose deadline is at or before `now` (milliseconds
    /// since the epoch): the sweep, with the time given (tests move it).
    pub async fn expire_held_builds_at(&self, now: i64) {
        let hours = self.inner.config.confirmation_timeout.as_secs_f64() / 3600.0;
        let message = format!(
            "expired: nobody confirmed the plan within {}; the plan was discarded",
            if hours >= 1.0 {
                format!("{hours:.0} h")
            } else {
                format!("{} s", self.inner.config.confirmation_timeout.as_secs())
            }
        );
        let expired = match self.inner.store.expire_held_builds(now, &message).await {
            Ok(expired) => expired,
            Err(error) => {
                tracing::error!(%error, "cannot expire held builds");
                return;
            }
        };
        for build_id in expired {
            self.note(&build_id, "guard", "warn", &message).await;
            if let Ok(build) = self.inner.store.build_by_id(&build_id).await {
                self.audit_system(
                    "build.expire",
                    &build,
                    Some(format!("build={}", build.number)),
                )
                .await;
            }
        }
    }

    /// The protections a workspace remembers, as the guard reads them.
    pub(crate) async fn remembered(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<abode_guard::RememberedProtection>, ControlError> {
        let stored = self.inner.store.protections(workspace_id).await?;
        Ok(stored
            .into_iter()
            .map(|protection| abode_guard::RememberedProtection {
                mode: abode_guard::Mode::parse(&protection.mode)
                    .unwrap_or(abode_guard::Mode::Block),
                address: protection.address,
            })
            .collect())
    }

    pub async fn protections(
        &self,
        caller: &Caller,
        reference: &str,
    ) -> Result<Vec<Protection>, ControlError> {
        let workspace = self.resolve_workspace(caller, reference).await?;
        Ok(self.inner.store.protections(&workspace.id).await?)
    }

    /// Removes a workspace without running Terraform (owners only): the way
    /// out for a workspace no build can delete any more (a template that no
    /// longer plans, a provider that is gone). A held build is canceled; a
    /// running one must be canceled first. Its last state stays readable
    /// through [`Control::workspace_state`]; the answer lists the resources
    /// of that state, which may still exist and are now nobody's.
    pub async fn orphan_workspace(
        &self,
        caller: &Caller,
        reference: &str,
    ) -> Result<Orphaned, ControlError> {
        if !caller.is_owner() {
            return Err(ControlError::Forbidden(
                "only owners can remove a workspace without running Terraform".into(),
            ));
        }
        let workspace = self.resolve_workspace(caller, reference).await?;
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
            self.note(&latest.id, "guard", "warn", &message).await;
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
        self.audit(
            Some(&caller.user),
            caller.request_id.clone(),
            "workspace.orphan",
            "workspace",
            &target,
            "success",
            Some(format!("resources={}", resources.len())),
        )
        .await;
        let workspace = self.inner.store.workspace_by_id(&workspace.id).await?;
        Ok(Orphaned {
            workspace,
            resources,
        })
    }

    /// The workspace's last Terraform state (owners only; audited): how an
    /// operator finds what an orphaned workspace left behind. It holds every
    /// secret of the workspace, so it is the one answer that carries them.
    pub async fn workspace_state(
        &self,
        caller: &Caller,
        reference: &str,
    ) -> Result<Vec<u8>, ControlError> {
        if !caller.is_owner() {
            return Err(ControlError::Forbidden(
                "only owners can read a workspace's Terraform state".into(),
            ));
        }
        let workspace = self.resolve_workspace(caller, reference).await?;
        let target = format!("{}/{}", workspace.owner_name, workspace.name);
        let state = self
            .inner
            .store
            .state(&workspace.id)
            .await?
            .ok_or_else(|| {
                ControlError::NotFound(format!("workspace \"{target}\" has no stored state"))
            })?;
        self.audit(
            Some(&caller.user),
            caller.request_id.clone(),
            "workspace.state_read",
            "workspace",
            &target,
            "success",
            None,
        )
        .await;
        Ok(state)
    }

    /// Releases one remembered protection (owners and template-admins), on the record.
    pub async fn release_protection(
        &self,
        caller: &Caller,
        reference: &str,
        address: &str,
    ) -> Result<Protection, ControlError> {
        if !caller.is_admin() {
            return Err(ControlError::Forbidden(
                "only owners and template-admins can release a protection".into(),
            ));
        }
        let workspace = self.resolve_workspace(caller, reference).await?;
        let released = or_not_found(
            self.inner
                .store
                .release_protection(&workspace.id, address)
                .await,
            || format!("workspace \"{reference}\" does not remember a protection of {address}"),
        )?;
        self.audit(
            Some(&caller.user),
            caller.request_id.clone(),
            "protection.release",
            "workspace",
            &format!("{}/{}", workspace.owner_name, workspace.name),
            "success",
            Some(format!(
                "address={} mode={}",
                released.address, released.mode
            )),
        )
        .await;
        Ok(released)
    }

    /// The audit log as the caller may see it (members: their own workspaces,
    /// logins and tokens only), newest first.
    pub async fn audit_events(
        &self,
        caller: &Caller,
        query: &AuditQuery,
    ) -> Result<Page<AuditEvent>, ControlError> {
        let target = match &query.workspace {
            Some(reference) => {
                let workspace = self.resolve_workspace(caller, reference).await?;
                Some(format!("{}/{}", workspace.owner_name, workspace.name))
            }
            None => None,
        };
        let visible_to = (!caller.is_admin())
            .then(|| (format!("{}/", caller.user.username), caller.user.id.clone()));
        Ok(self
            .inner
            .store
            .list_audit(&AuditFilter {
                target,
                visible_to,
                any_target: query.target.clone(),
                actor: query.actor.clone(),
                action: query.action.clone(),
                since: query.since,
                until: query.until,
                after: query.after.clone(),
                limit: page_size(query.limit),
            })
            .await?)
    }

    /// An audit event of the server's own doing about a build.
    pub(crate) async fn audit_system(&self, action: &str, build: &Build, details: Option<String>) {
        self.audit(
            None,
            None,
            action,
            "workspace",
            &format!("{}/{}", build.owner_name, build.workspace_name),
            "success",
            details,
        )
        .await;
    }

    // ---- agents ----

    pub async fn authenticate_agent(&self, token: &str) -> Result<Agent, ControlError> {
        match self
            .inner
            .store
            .agent_by_token_hash(&secrets::token_hash(token))
            .await
        {
            Ok(agent) => {
                // An agent belongs to a started workspace: once a stop (or a
                // delete) has succeeded, its token reads nothing more.
                let now = self
                    .inner
                    .store
                    .latest_succeeded_build(&agent.workspace_id)
                    .await?;
                match now {
                    Some(build) if build.transition == Transition::Start => Ok(agent),
                    _ => Err(ControlError::Unauthorized(
                        "this agent's workspace is no longer started; its token is no longer valid"
                            .into(),
                    )),
                }
            }
            Err(StoreError::NotFound(_)) => {
                Err(ControlError::Unauthorized("unknown agent token".into()))
            }
            Err(other) => Err(other.into()),
        }
    }

    pub async fn agent_heartbeat(&self, agent: &Agent) -> Result<(), ControlError> {
        Ok(self.inner.store.agent_heartbeat(&agent.id, None).await?)
    }

    /// A new lifecycle state: `starting`, `ready`, or `start_error` with the
    /// startup script's exit status (if it ran at all). Counts as a heartbeat.
    pub async fn agent_lifecycle(
        &self,
        agent: &Agent,
        state: &str,
        exit_status: Option<i64>,
    ) -> Result<(), ControlError> {
        let lifecycle: abode_store::AgentLifecycle =
            state
                .parse()
                .map_err(|error: abode_store::UnknownAgentLifecycle| {
                    ControlError::BadRequest(error.to_string())
                })?;
        let exit_status = match lifecycle {
            abode_store::AgentLifecycle::StartError => exit_status,
            _ => None,
        };
        // What a shell reports: 0-255 (128 + n for a signal).
        if let Some(status) = exit_status.filter(|status| !(0..=255).contains(status)) {
            return Err(ControlError::BadRequest(format!(
                "exit_status {status} is not an exit status (0 to 255)"
            )));
        }
        Ok(self
            .inner
            .store
            .agent_lifecycle(&agent.id, lifecycle, exit_status)
            .await?)
    }

    /// The workspace an agent belongs to.
    pub async fn agent_workspace(&self, agent: &Agent) -> Result<Workspace, ControlError> {
        Ok(self
            .inner
            .store
            .workspace_by_id(&agent.workspace_id)
            .await?)
    }

    // ---- helpers ----

    /// [`Control::log`] where the caller goes on whatever happens: a line that
    /// cannot be written is reported in the server's log instead.
    async fn note(&self, build_id: &str, stage: &str, level: &str, text: &str) {
        if let Err(error) = self.log(build_id, stage, level, text).await {
            tracing::error!(build = %build_id, %error, "cannot write a build log line");
        }
    }

    async fn log(
        &self,
        build_id: &str,
        stage: &str,
        level: &str,
        text: &str,
    ) -> Result<(), ControlError> {
        self.inner
            .store
            .append_log(
                build_id,
                &abode_store::NewLogLine {
                    stage: stage.into(),
                    level: level.into(),
                    text: text.into(),
                },
            )
            .await?;
        self.inner.log_written.notify_waiters();
        Ok(())
    }

    async fn audit_build(&self, caller: &Caller, build: &Build) {
        self.audit(
            Some(&caller.user),
            caller.request_id.clone(),
            "build.start",
            "workspace",
            &format!("{}/{}", build.owner_name, build.workspace_name),
            "success",
            Some(format!(
                "build={} transition={} reason={} version={}",
                build.number, build.transition, build.reason, build.template_version
            )),
        )
        .await;
    }

    /// Records an audit event; a failure to record is logged, not fatal, so
    /// that the action the user asked for is not undone by bookkeeping.
    #[allow(clippy::too_many_arguments)]
    async fn audit(
        &self,
        actor: Option<&User>,
        request_id: Option<String>,
        action: &str,
        target_type: &str,
        target: &str,
        outcome: &str,
        details: Option<String>,
    ) {
        let event = audit_event(
            actor,
            request_id,
            action,
            target_type,
            target,
            outcome,
            details,
        );
        if let Err(error) = self.inner.store.record_audit(&event).await {
            tracing::error!(%error, action, "cannot record an audit event");
        }
    }
}

/// One audit event, as [`Control::audit`] records it (and as a store
/// transaction that must not happen unaudited records it with its write).
#[allow(clippy::too_many_arguments)]
fn audit_event(
    actor: Option<&User>,
    request_id: Option<String>,
    action: &str,
    target_type: &str,
    target: &str,
    outcome: &str,
    details: Option<String>,
) -> NewAuditEvent {
    NewAuditEvent {
        actor_id: actor.map(|user| user.id.clone()),
        actor_name: actor.map(|user| user.username.clone()),
        action: action.into(),
        target_type: target_type.into(),
        target: target.into(),
        outcome: outcome.into(),
        request_id,
        details,
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

/// What the guard decided for a build, read from its stored report; `None`
/// for a build that never reached the guard. A report that names no known
/// decision is an error, never a guess.
pub fn guard_decision(build: &Build) -> Result<Option<abode_guard::Decision>, ControlError> {
    let Some(report) = build.guard_report.as_deref() else {
        return Ok(None);
    };
    let text = serde_json::from_str::<serde_json::Value>(report)
        .ok()
        .and_then(|report| report.get("decision")?.as_str().map(str::to_string))
        .unwrap_or_default();
    abode_guard::Decision::parse(&text)
        .map(Some)
        .ok_or_else(|| {
            ControlError::Internal(format!(
                "the stored guard report of build #{} names no known decision (`{text}`)",
                build.number
            ))
        })
}

/// Names of users, templates and workspaces: 1-64 of `[a-z0-9-]`, starting with
/// a letter or digit (they appear in paths, URLs and directory names).
pub fn validate_name(what: &str, name: &str) -> Result<(), ControlError> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-');
    if valid {
        Ok(())
    } else {
        Err(ControlError::BadRequest(format!(
            "invalid {what} \"{name}\": use 1-64 lowercase letters, digits and '-', starting with a letter or digit"
        )))
    }
}

/// `local@domain.tld`: one `@`, a non-empty local part, a dotted domain,
/// no spaces or control characters, at most 254 bytes. Deliverability is
/// not checked; shape is, so that nobody stores a paragraph as an address.
fn validate_email(email: &str) -> Result<(), ControlError> {
    let shaped = email.len() <= 254
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
        && match email.split_once('@') {
            Some((local, domain)) => {
                !local.is_empty()
                    && !domain.contains('@')
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
                    && !domain.contains("..")
            }
            None => false,
        };
    if shaped {
        Ok(())
    } else {
        // Not echoed: it may be anything, of any length.
        Err(ControlError::BadRequest(
            "invalid email address: expected name@domain.tld, at most 254 characters".into(),
        ))
    }
}

fn validate_password(password: &str) -> Result<(), ControlError> {
    if password.chars().count() >= MIN_PASSWORD_LENGTH {
        Ok(())
    } else {
        Err(ControlError::BadRequest(format!(
            "the password must have at least {MIN_PASSWORD_LENGTH} characters"
        )))
    }
}
