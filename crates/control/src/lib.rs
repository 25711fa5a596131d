//! Abode's control plane: the domain rules of users, templates, workspaces and
//! builds, and the embedded provisioners that run builds through Terraform.
//!
//! The HTTP layer (`abode-api`) only translates requests into calls on
//! [`Control`] and its answers into JSON; every rule (who may do what, which
//! build may start, what a workspace's status is) lives here, and every byte
//! stored goes through `abode-store`.
//!
//! # Services
//!
//! The domain's rules are services that each hold only what they need (the
//! store, the clock, the config values they read, and handles of the services
//! they call), composed by `Control::new`, which hands each its parts; the API,
//! the dashboard and the binary hold `Control`. What is not a domain rule has a
//! crate of its own and is called from here: the machine side of a build
//! (`abode-runner`), the daemon wire (`abode-protocol`), delivery
//! (`abode-delivery`), the policy table (`abode-authz`), parameters and presets
//! (`abode-parameters`), password hashing and tokens (`abode-credentials`), who
//! is calling (`abode-identity`, `Control::identity()`).
//!
//! From the bottom up, each naming only those above it in this list:
//!
//! - `BuildLog` (`build_log.rs`, `log_backlog.rs`): every line of a build's log
//!   is written here, and those who follow a log are woken here.
//! - `JobQueue` (`job_queue.rs`): a queued job wakes an idle worker and is
//!   announced to the other servers.
//! - `Notifications` (`notifications/`): who is told what, the inbox and each
//!   person's settings; delivery is `abode-delivery`'s.
//! - `ProvisionerKeys` (`provisioner_keys.rs`): the daemons' keys, shown once
//!   and stored as their SHA-256.
//! - `ExternalAuth` (`external_auth.rs`): a person's linked accounts.
//! - `Templates` (`templates/`): push, versions, presets, access, activation
//!   and its preview gate, create estimates.
//! - `Retained` (`retained.rs`): retained resources as people see and change
//!   them.
//! - `Builds`, the door (`builds/`): every build request.
//! - `Held` (`held.rs`): held builds and the protections a workspace remembers.
//! - `Workspaces` (`workspaces/`): finding a person's workspace, creating,
//!   views, lists, activity.
//! - `Prebuilds` (`prebuilds/`): the reconciler of prebuilt pools.
//! - `Scheduler` (`scheduler/`): the lifecycle scheduler's tick.
//! - `ScheduleSettings` (`schedule_settings.rs`): a template's policy, a
//!   workspace's schedule, extend, wake.
//! - `Previews` (`previews.rs`): fleet previews: start, report, gate.
//! - `Agents` (`agents.rs`): the agents' tokens, heartbeats, lifecycle and
//!   their apps' health.
//!
//! A service reaches another only through its methods, never its store.
//! Authorization stays one table (`abode-authz`), asked at each entry that
//! takes a `Caller`.
//!
//! - `WorkspaceBuilds` (`workspace_builds/`): a person's builds of a
//!   workspace they name (requests, reads, logs, cancels, confirmations,
//!   renames, restarts, a retained resource's destroy) and its remembered
//!   protections: each finds the workspace first, then asks the door.
//! - `AuditLog` (`audit_log.rs`): the audit log as people read it.
//!
//! `Control` is the composition root: its constructor and an accessor per
//! service, and no rule of its own. The machine room (the embedded workers
//! and the server's half of every build, the daemons' side, the state
//! backend, leases, recovery, free disk, server identity) is `abode-host`,
//! which takes these services, never `Control`. A helper two modules need
//! lives in a module of its own (`quota_text.rs`, `retention.rs`,
//! `holders.rs`, `times.rs`, `cancel_switches.rs`, `unsaved.rs`); no module names another
//! round and back (house.rs). Each module's own `//!` says what it does.
//!
//! # A build, from requested to applied
//!
//! `Builds::request` (`builds/mod.rs`) takes a target (an existing workspace,
//! or a new one with its first build), an actor, a transition, a version
//! choice, a reason and parameter values. It checks what may be built now
//! (`workspace_status.rs`), resolves and checks the version (it must have
//! passed validation) and the parameters (every problem in one 400), records
//! the build and its job (and a new workspace) in one store transaction, audits
//! it with its actor and reason, and wakes a worker. A worker of `abode-host`
//! claims the job (or an external daemon through it) and runs
//! `abode-runner`'s sequence; the server's half (`abode-host`'s `ServerJob`)
//! gives it its inputs and takes the
//! workspace's state lock, judges the plan (`guard_step.rs`), costs it and,
//! with `--quota-enforce`, refuses a build over its owner's budget before any
//! apply (`quota_step.rs`), records what an apply made, and checks the end
//! against its own decisions. When a build succeeds, and only then, the
//! workspace moves to its version and parameter values (the store's
//! `finish_build`, which every end goes through).
//!
//! # What it keeps
//!
//! - The server decides. Wherever Terraform runs, a plan is applied only after
//!   `ServerJob` judged it with the workspace's protections and said `allow`; a
//!   daemon's verdict, state and end go through the same `ServerJob` methods as
//!   an embedded worker's. A build's plan is judged once (the first verdict
//!   stands, in the statement that records it), a confirmed plan is not judged
//!   again, the plan held is the one kept when the guard said `confirm`, and a
//!   run ends `applied` only after `allow` (or for a confirmed plan) and `held`
//!   only after `confirm`.
//! - Every build, by a person or by the system, is requested through
//!   `Builds::request`, and every build's plan goes through the guard. A
//!   confirmation re-queues a held build only with its digest, used once, and
//!   refused if the workspace's state changed since the plan.
//! - The Terraform state is saved after every apply, whatever its outcome, and
//!   only if it follows the stored one (a whole state of the same lineage,
//!   serial not lower: `states.rs`, the one compare-and-write of a state, for
//!   Terraform's own writes through the state backend and for what a run left
//!   in its work dir). Work dirs are private (0700) and removed at the end of
//!   each build, once no Terraform of it runs, and only by the run whose work
//!   dir it still is.
//! - One Terraform per workspace, ever. Every build's Terraform keeps its state
//!   through the server's state backend (`abode-host`, `state_backend.rs`) under the
//!   workspace's state lock, which a run takes when it starts with a secret
//!   only it knows; a state write, a state read or a Terraform lock of a run
//!   that does not hold it is refused, in the transaction that writes. A lock
//!   is released only when its run reports that its Terraform ended, or by a
//!   person's audited unlock; a build failed because its holder stopped
//!   renewing its lease keeps it. A holder checks its lease before the plan is
//!   judged and before it is applied, and a lost lease interrupts its Terraform
//!   (`e2e_fencing`: servers frozen with SIGSTOP while planning and mid-apply).
//! - A server that dies never makes a build apply anything twice
//!   (`abode-host`, `recovery.rs`, SIGKILL of the real binary in `e2e_crash`). A build's
//!   Terraform is not killed with the server; the restarted server follows that
//!   exact process, stores what Terraform could not hand to the state backend,
//!   ends the build `failed` (or `canceled`) saying what happened, and never
//!   applies a confirmed plan again, except that a confirmed apply that ran on
//!   to success ends `succeeded`. At a graceful stop the API outlives the
//!   workers, so an interrupted Terraform stores its state on its way out.
//! - With several servers on one database, a running build is only ever taken
//!   over or failed by the server that claimed it, or by another once that
//!   server's job lease has run out and stayed unrenewed for a round
//!   (`abode-host`, `job_leases.rs`; `e2e_servers`, `e2e_daemons`). Only a build whose plan
//!   was judged can have applied anything, so only such a build is failed by
//!   another; one never judged is queued again.
//! - A workspace's version, parameters and name change only when a build of
//!   them succeeds; a canceled, failed or expired update or rename leaves the
//!   workspace as it was. An ephemeral parameter's value is in no record once
//!   its build ends or is held (`abode-host`, `provisioner/ephemeral.rs`); only what
//!   Terraform writes itself (the state, a held build's saved plan) keeps it.
//! - A fleet preview never applies and never writes a workspace's records: it
//!   runs `init`, `plan` and `show`, never `apply`, and only reads the stored
//!   state (`e2e_preview`). A worker takes a preview only when no build job
//!   waits.
//! - A retained resource is always in a workspace's state or in a held record,
//!   never in neither, whatever moment the server dies at (`e2e_retain`); it is
//!   destroyed only by a plan a person confirmed, or at an expiry its
//!   template's rule said `expire = "destroy"` for.
//! - Every action is authorized by `authz::authorize` against the policy table,
//!   naming an `authz::Action` and the object's owner; a reference to another
//!   user's workspace by a caller who may not read others' workspaces is
//!   refused before any lookup.
//! - Agent tokens authenticate only the agent routes. Streams to an agent are
//!   the gateway's (`abode-gateway`), which asks these services who may open
//!   them; this crate never links it.
//! - No external auth token is stored, logged, audited or answered in the clear
//!   except to the agent of the owner's workspace; the only place one is opened
//!   is `ExternalAuth`.
//! - Time comes from the injected clock (`Config::clock`): deadlines, expiry,
//!   agent health, session policy and audit times read it, never the system's
//!   clock directly.

pub mod agents;
pub mod audit;
pub mod audit_log;
pub use abode_authz as authz;
use abode_credentials::{hashing, secrets};
mod build_log;
mod builds;
pub mod cancel_switches;
pub use abode_identity::client_address;
pub mod disk;
mod error;
pub mod external_auth;
mod held;
pub mod holders;
mod job_queue;
mod log_backlog;
pub mod notifications;
pub mod workspace_status;
pub use abode_parameters as parameters;
pub mod prebuilds;
pub use abode_parameters::presets;
pub mod previews;
mod provisioner_keys;
pub mod quota_text;
pub mod retained;
pub mod retention;
pub mod schedule_settings;
pub mod scheduler;
pub mod scripts;
pub mod state;
pub mod tags;
mod templates;
pub mod times;
pub mod unsaved;
pub mod workspace_builds;
mod workspaces;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use abode_clock::{Clock, ManualClock};
pub use abode_metrics::Metrics;
use abode_store::Store;
use tokio::sync::watch;

pub use abode_contract::apps as apps_contract;
pub use abode_identity::audit::recording as audit_recording;
pub use abode_identity::validate_name;
pub use abode_identity::Actor;
pub use abode_identity::{
    Caller, GroupEdit, Identity, IdentityConfig, IdentityError, StatusCommand, SESSION_EXPIRED,
};
pub use abode_identity::{OidcFinished, OidcStart, SignInMethods};
pub use abode_runner::archive::{MAX_ENTRIES, MAX_UNPACKED_BYTES};
pub use audit_log::AuditQuery;
pub use build_log::{BuildLog, LogPage};
pub use builds::create_estimate;
pub use builds::MAX_PARAMETERS_BYTES;
pub use builds::{
    resolve_parameters, BuildOrder, BuildRequest, BuildTarget, Builds, VersionChoice,
};
pub use client_address::ClientAddress;
pub use error::ControlError;
pub use hashing::default_threads as default_hashing_threads;
pub use held::{guard_decision, Held};
pub use job_queue::JobQueue;
pub use notifications::{Notifications, NotificationsConfig, ReplacedResource};
pub use prebuilds::{PoolStatus, Prebuilds, PrebuildsConfig};
pub use provisioner_keys::{ProvisionerKey, ProvisionerKeys};
pub use scheduler::{Scheduler, SchedulerConfig};
pub use secrets::token_hash;
pub use templates::{PermissionSubject, PushOptions, Templates, TemplatesConfig, VersionLint};
pub use unsaved::UnsavedConsent;
pub use workspace_status::{AgentHealth, AgentStatus, AgentTimeouts, WorkspaceStatus};
pub use workspaces::{
    Orphaned, Sharing, WorkspaceQuery, WorkspaceView, Workspaces, ACTIVITY_THROTTLE,
};

/// How the control plane runs; everything has a default fit for one machine.
#[derive(Debug, Clone)]
pub struct Config {
    /// Root of the server's files: the database lives elsewhere, but volumes,
    /// build work dirs and process logs live under here.
    pub data_dir: PathBuf,
    /// The URL agents call back (`ABODE_AGENT_URL` in builds).
    pub access_url: String,
    /// The URL other servers on the same database reach this one at, to
    /// relay connections to the agents' tunnels it holds; none: it holds
    /// tunnels only for connections that reach it.
    pub relay_url: Option<String>,
    /// The URL this server's own builds' Terraform reaches its state
    /// backend at: the server's listener, on loopback when it listens on
    /// every address (`abode-host`, `state_backend.rs`).
    pub state_backend_url: String,
    /// The filesystem mirror holding the abode provider, if installed.
    pub provider_mirror: Option<PathBuf>,
    /// The program `abode_agent.init_script` starts; `None`: the provider's own.
    pub agent_binary: Option<PathBuf>,
    /// The authorities (PEM) this server trusts besides the system's
    /// (`--ca-cert`): handed to agents and to Terraform's state backend.
    pub ca_cert: Option<String>,
    /// The proxies whose `X-Forwarded-For`/`X-Forwarded-Proto` are believed
    /// (`--trusted-proxies`); none by default.
    pub trusted_proxies: client_address::TrustedProxies,
    /// Whether this server serves HTTPS (`--tls-address`): then a password
    /// is taken on the plain listener only from this machine
    /// ([`ClientAddress::may_send_password`]).
    pub tls_served: bool,
    pub agent_timeouts: AgentTimeouts,
    pub agent_heartbeat_interval: Duration,
    /// How often agents scan their home for unsaved work (told to agents;
    /// `--unsaved-scan-interval`).
    pub unsaved_scan_interval: Duration,
    /// How long a canceled Terraform gets after SIGINT before it is killed.
    pub cancel_grace: Duration,
    /// How long a build held by the guard waits for a confirmation.
    pub confirmation_timeout: Duration,
    /// What Terraform runs get of the server's environment (see
    /// `abode_terraform::run::PassedEnv`): by default only what Terraform
    /// needs to run; the build's own variables come on top.
    pub terraform_env: Vec<(String, String)>,
    /// The sandbox every Terraform run (build, preview, push) goes in;
    /// `None` only when the operator turned it off.
    pub terraform_isolation: Option<Arc<abode_terraform::isolation::Isolation>>,
    /// The process supervisor's socket, given to sandboxed builds.
    pub process_supervisor: Option<PathBuf>,
    /// The uids workspaces are given, first and last (`--workspace-uids`);
    /// `None`: every workspace runs as the sandbox's user.
    pub workspace_uids: Option<(u32, u32)>,
    /// How many of each workspace's newest builds keep their plan JSON (it
    /// can hold secrets, and is large); held builds always keep theirs.
    pub plan_retention: usize,
    /// How logins, sessions and API tokens behave.
    pub identity: IdentityConfig,
    /// Where every part of the control plane reads the time (the store's
    /// timestamps included: give the store the same clock).
    pub clock: Clock,
    /// Where builds, the guard and provisioners record (`abode-metrics`);
    /// the server exposes it when asked to (`--prometheus-address`).
    pub metrics: Metrics,
    /// How notifications are delivered (channels, retries, leases).
    pub notifications: NotificationsConfig,
    /// How the prebuild pools are reconciled.
    pub prebuilds: PrebuildsConfig,
    /// How the lifecycle scheduler ticks.
    pub scheduler: SchedulerConfig,
    /// This server among those sharing the database: it holds the jobs it
    /// claims and the leases of the loops that run once (stable across
    /// restarts of one data dir, so that a restarted server takes back its own).
    pub server_id: String,
    /// How long a claimed job stays this server's without a renewal; the
    /// server renews every quarter of it. Another server fails the build once
    /// it has run out (`job_leases.rs`).
    pub job_lease: Duration,
    /// Below this much free space in the data dir (bytes; 0: no minimum),
    /// this server starts no build (`free_disk.rs`).
    pub min_free_disk: u64,
    /// Whether a new template's access list starts with `Everyone: use`
    /// (`--default-template-access use`, the default) or empty (`none`).
    pub new_templates_for_everyone: bool,
    /// The provisioner tags this server's provisioners offer (`key=value`,
    /// checked by [`tags::parse_tags`]): they take the jobs of versions
    /// whose tags are all among them (`tags.rs`).
    pub provisioner_tags: Vec<String>,
    /// Whether a start, create, update or claim whose plan would take its
    /// owner past their budget is refused before apply (`--quota-enforce`).
    /// Off: costs are still computed, logged and recorded.
    pub quota_enforce: bool,
    /// The external auth providers and the key their tokens are sealed
    /// with (`--external-auth-config`, `--external-auth-key-file`).
    pub external_auth: external_auth::ExternalAuthConfig,
}

impl Config {
    pub fn new(data_dir: PathBuf, access_url: String) -> Config {
        Config {
            data_dir,
            state_backend_url: access_url.clone(),
            access_url,
            relay_url: None,
            provider_mirror: None,
            workspace_uids: None,
            agent_binary: None,
            ca_cert: None,
            trusted_proxies: client_address::TrustedProxies::default(),
            tls_served: false,
            agent_timeouts: AgentTimeouts {
                connect: Duration::from_secs(30),
                heartbeat: Duration::from_secs(15),
            },
            agent_heartbeat_interval: Duration::from_secs(5),
            unsaved_scan_interval: Duration::from_secs(5 * 60),
            cancel_grace: Duration::from_secs(30),
            confirmation_timeout: Duration::from_secs(24 * 60 * 60),
            terraform_env: abode_terraform::run::PassedEnv::default().from_process(),
            terraform_isolation: None,
            process_supervisor: None,
            plan_retention: 20,
            identity: IdentityConfig::default(),
            clock: Clock::system(),
            metrics: Metrics::new(),
            notifications: NotificationsConfig::default(),
            prebuilds: PrebuildsConfig::default(),
            scheduler: SchedulerConfig::default(),
            server_id: abode_store::new_id(),
            job_lease: Duration::from_secs(60),
            min_free_disk: 256 * 1024 * 1024,
            new_templates_for_everyone: true,
            provisioner_tags: Vec::new(),
            quota_enforce: false,
            external_auth: external_auth::ExternalAuthConfig::default(),
        }
    }

    pub fn volumes_dir(&self) -> PathBuf {
        self.data_dir.join("volumes")
    }

    /// The archives of snapshots taken before confirmed destroys (issue 47).
    pub fn snapshots_dir(&self) -> PathBuf {
        self.data_dir.join("snapshots")
    }

    pub fn process_logs_dir(&self) -> PathBuf {
        self.data_dir.join("process-logs")
    }

    /// Private per-build and per-push working directories.
    pub fn work_dir(&self) -> PathBuf {
        self.data_dir.join("work")
    }
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
    jobs: JobQueue,
    /// Build log lines, and the followers waiting for them.
    build_log: BuildLog,
    /// Accounts, roles, logins, sessions and API tokens.
    identity: Arc<Identity>,
    /// Templates, their versions, their activation and their presets.
    templates: Arc<Templates>,
    /// The door every build goes through.
    builds: Builds,
    /// The prebuild pools.
    prebuilds: Prebuilds,
    /// The lifecycle scheduler.
    scheduler: Scheduler,
    /// The accounts people link for their workspaces' Git.
    external_auth: external_auth::ExternalAuth,
    /// The keys of external provisioner daemons.
    provisioner_keys: provisioner_keys::ProvisionerKeys,
    /// What workspace deletes retained.
    retained: Arc<retained::Retained>,
    /// Workspaces: finding, viewing, listing, creating, orphaning.
    workspaces: Workspaces,
    /// Template policies and workspace schedules as people set them.
    schedule_settings: schedule_settings::ScheduleSettings,
    /// Fleet previews.
    previews: previews::Previews,
    /// The messages of events, people's inboxes and preferences.
    notifications: Notifications,
    /// Builds held for a confirmation, and remembered protections.
    held: held::Held,
    /// A person's builds of a workspace they name.
    workspace_builds: workspace_builds::WorkspaceBuilds,
    /// The audit log as people read it.
    audit_log: audit_log::AuditLog,
    agents: agents::Agents,
}

impl Control {
    pub fn new(store: Store, config: Config) -> Control {
        let identity = Arc::new(Identity::new(
            store.clone(),
            config.clock.clone(),
            config.identity.clone(),
        ));
        let templates = Arc::new(Templates::new(
            store.clone(),
            TemplatesConfig {
                work_dir: config.work_dir(),
                provider_mirror: config.provider_mirror.clone(),
                terraform_env: config.terraform_env.clone(),
                isolation: config.terraform_isolation.clone(),
                new_templates_for_everyone: config.new_templates_for_everyone,
                external_auth_providers: config
                    .external_auth
                    .providers
                    .iter()
                    .map(|provider| provider.id.clone())
                    .collect(),
            },
        ));
        let retained = Arc::new(retained::Retained::new(
            store.clone(),
            config.clock.clone(),
            config.volumes_dir(),
            config.snapshots_dir(),
        ));
        let external_auth = external_auth::ExternalAuth::new(
            store.clone(),
            config.external_auth.clone(),
            config.clock.clone(),
            config.access_url.clone(),
        );
        let build_log = BuildLog::new(store.clone());
        let jobs = JobQueue::new(store.clone());
        let notifications =
            Notifications::new(store.clone(), config.clock.clone(), &config.notifications);
        let builds = Builds::new(builds::BuildsParts {
            store: store.clone(),
            clock: config.clock.clone(),
            metrics: config.metrics.clone(),
            quota_enforce: config.quota_enforce,
            agent_heartbeat: config.agent_timeouts.heartbeat,
            templates: templates.clone(),
            identity: identity.clone(),
            external_auth: external_auth.clone(),
            build_log: build_log.clone(),
            jobs: jobs.clone(),
            audit: audit::Audit::new(store.clone()),
            cancel_switches: cancel_switches::CancelSwitches::default(),
        });
        let prebuilds = Prebuilds::new(prebuilds::PrebuildsParts {
            store: store.clone(),
            clock: config.clock.clone(),
            metrics: config.metrics.clone(),
            config: config.prebuilds.clone(),
            server_id: config.server_id.clone(),
            agent_heartbeat: config.agent_timeouts.heartbeat,
            quota_enforce: config.quota_enforce,
            templates: templates.clone(),
            builds: builds.clone(),
            build_log: build_log.clone(),
            notifications: notifications.clone(),
            audit: audit::Audit::new(store.clone()),
        });
        let scheduler = Scheduler::new(scheduler::SchedulerParts {
            store: store.clone(),
            clock: config.clock.clone(),
            metrics: config.metrics.clone(),
            config: config.scheduler.clone(),
            server_id: config.server_id.clone(),
            identity: identity.clone(),
            builds: builds.clone(),
            notifications: notifications.clone(),
            retained: retained.clone(),
            audit: audit::Audit::new(store.clone()),
        });
        let workspaces = Workspaces::new(workspaces::WorkspacesParts {
            store: store.clone(),
            clock: config.clock.clone(),
            agent_timeouts: config.agent_timeouts,
            templates: templates.clone(),
            builds: builds.clone(),
            retained: retained.clone(),
            build_log: build_log.clone(),
            audit: audit::Audit::new(store.clone()),
            identity: identity.clone(),
        });
        let schedule_settings =
            schedule_settings::ScheduleSettings::new(schedule_settings::ScheduleSettingsParts {
                store: store.clone(),
                clock: config.clock.clone(),
                audit: audit::Audit::new(store.clone()),
                templates: templates.clone(),
                workspaces: workspaces.clone(),
            });
        let previews = previews::Previews::new(previews::PreviewsParts {
            store: store.clone(),
            templates: templates.clone(),
            workspaces: workspaces.clone(),
            jobs: jobs.clone(),
        });
        let agents = agents::Agents::new(
            store.clone(),
            config.clock.clone(),
            notifications.clone(),
            config.metrics.clone(),
        );
        let held = held::Held::new(held::HeldParts {
            store: store.clone(),
            clock: config.clock.clone(),
            build_log: build_log.clone(),
            notifications: notifications.clone(),
            jobs: jobs.clone(),
            confirmation_timeout: config.confirmation_timeout,
            expiry_warning: config.notifications.expiry_warning,
        });
        let workspace_builds =
            workspace_builds::WorkspaceBuilds::new(workspace_builds::WorkspaceBuildsParts {
                store: store.clone(),
                workspaces: workspaces.clone(),
                builds: builds.clone(),
                build_log: build_log.clone(),
                held: held.clone(),
                notifications: notifications.clone(),
                retained: retained.clone(),
                audit: audit::Audit::new(store.clone()),
                clock: config.clock.clone(),
            });
        let audit_log = audit_log::AuditLog::new(store.clone(), workspaces.clone());
        Control {
            inner: Arc::new(Inner {
                workspace_builds,
                audit_log,
                identity,
                templates,
                builds,
                prebuilds,
                scheduler,
                workspaces,
                schedule_settings,
                previews,
                external_auth,
                provisioner_keys: provisioner_keys::ProvisionerKeys::new(store.clone()),
                retained,
                store,
                config,
                jobs,
                build_log,
                notifications,
                held,
                agents,
            }),
        }
    }

    /// Who may exist and who is calling: the only part of the control plane
    /// that checks people's passwords, sessions and API tokens.
    pub fn identity(&self) -> &Identity {
        &self.inner.identity
    }

    /// Templates and their versions: the only part that pushes, validates
    /// and activates them.
    pub fn templates(&self) -> &Templates {
        &self.inner.templates
    }

    /// The accounts people link (external auth): the only part that holds
    /// their tokens.
    pub fn external_auth(&self) -> &external_auth::ExternalAuth {
        &self.inner.external_auth
    }

    /// The keys of external provisioner daemons: the only part that makes,
    /// lists, deletes and checks them.
    pub fn provisioner_keys(&self) -> &ProvisionerKeys {
        &self.inner.provisioner_keys
    }

    /// Resources workspace deletes retained, as people see and change them.
    pub fn retained(&self) -> &retained::Retained {
        &self.inner.retained
    }

    /// The build log: the only part that writes its lines and wakes those
    /// who follow them.
    pub fn build_log(&self) -> &BuildLog {
        &self.inner.build_log
    }

    /// Notifications: the only part that decides who is told what, and
    /// that reads and changes inboxes and preferences.
    pub fn notifications(&self) -> &Notifications {
        &self.inner.notifications
    }

    /// The job queue's wake-ups: the only part that wakes provisioners.
    pub fn jobs(&self) -> &JobQueue {
        &self.inner.jobs
    }

    /// Held builds and remembered protections: the only part that holds,
    /// confirms and expires a build the guard asked to confirm.
    pub fn held(&self) -> &held::Held {
        &self.inner.held
    }

    /// The door: the only part that records a build (and a new workspace).
    pub fn builds(&self) -> &Builds {
        &self.inner.builds
    }

    /// The prebuild pools: the only part that reconciles them.
    pub fn prebuilds(&self) -> &Prebuilds {
        &self.inner.prebuilds
    }

    /// The lifecycle scheduler: the only part that stops, starts, marks
    /// dormant and deletes workspaces on its own.
    pub fn scheduler(&self) -> &Scheduler {
        &self.inner.scheduler
    }

    /// Workspaces: the only part that finds a workspace a person names,
    /// and whether they may act on it.
    pub fn workspaces(&self) -> &Workspaces {
        &self.inner.workspaces
    }

    /// Schedule settings: template policies, workspace schedules, extend
    /// and wake, as people change them.
    pub fn schedule_settings(&self) -> &schedule_settings::ScheduleSettings {
        &self.inner.schedule_settings
    }

    /// Fleet previews: starting one, its report, and the activation gate
    /// it makes.
    pub fn previews(&self) -> &previews::Previews {
        &self.inner.previews
    }

    /// The agents as they call the server: tokens, heartbeats, lifecycle,
    /// their apps' health.
    pub fn agents(&self) -> &agents::Agents {
        &self.inner.agents
    }

    /// A person's builds of a workspace they name: requests, reads, logs,
    /// cancels, confirmations, renames, restarts, remembered protections.
    pub fn workspace_builds(&self) -> &workspace_builds::WorkspaceBuilds {
        &self.inner.workspace_builds
    }

    /// The audit log as the caller may read it.
    pub fn audit_log(&self) -> &audit_log::AuditLog {
        &self.inner.audit_log
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The store, for the control plane's own tests: a route or a page
    /// reads a record through the service that checks who may see it.
    #[cfg(test)]
    pub(crate) fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Whether the database answers (the server's readiness).
    pub async fn database_answers(&self) -> Result<(), ControlError> {
        Ok(self.inner.store.ping().await?)
    }

    /// Closes the database's connections, once the server has stopped
    /// serving.
    pub async fn close(&self) {
        self.inner.store.close().await;
    }

    /// Starts the domain's own loops: held builds' expiry, the prebuild
    /// reconciler, the lifecycle scheduler, closed accounts' tokens and the
    /// notifications' delivery. They stop when `shutdown` turns true. The
    /// builds' workers are the machine room's (`abode-host`).
    pub fn start_loops(&self, shutdown: watch::Receiver<bool>) -> Vec<tokio::task::JoinHandle<()>> {
        let mut handles = vec![
            tokio::spawn(held::expiry_sweeper(
                self.inner.held.clone(),
                self.inner.config.confirmation_timeout,
                shutdown.clone(),
            )),
            tokio::spawn(prebuilds::reconciler(
                self.inner.prebuilds.clone(),
                shutdown.clone(),
            )),
            tokio::spawn(scheduler::ticker(
                self.inner.scheduler.clone(),
                shutdown.clone(),
            )),
        ];
        let control = self.clone();
        let revocations = self.inner.identity.revocations();
        let stop = shutdown.clone();
        handles.push(tokio::spawn(async move {
            external_auth::closed_account_sweeper(&control.inner.external_auth, revocations, stop)
                .await;
        }));
        let dispatcher = abode_delivery::Dispatcher {
            outbox: self.inner.store.clone(),
            config: self.inner.config.notifications.clone(),
            clock: self.inner.config.clock.clone(),
            metrics: self.inner.config.metrics.clone(),
        };
        handles.push(tokio::spawn(dispatcher.run(shutdown)));
        handles
    }
}
