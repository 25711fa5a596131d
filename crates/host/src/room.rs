//! The machine room's parts ([`Host`]): the store, the config and the
//! control plane's services it calls, handed over by the composition root,
//! and what the machine room keeps of its own (the long-polls' stop, the
//! low-disk flag). Each other module adds what it does to `Host`.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use abode_control::{audit, Caller, Config};
use abode_control::{
    BuildLog, Builds, Held, JobQueue, Notifications, Prebuilds, Scheduler, Workspaces,
};
use abode_store::{Build, Store};
use tokio::sync::watch;

/// What the machine room is made of: the store, the config, and the
/// control plane's services it calls.
pub struct HostParts {
    pub store: Store,
    pub config: Config,
    pub builds: Builds,
    pub held: Held,
    pub build_log: BuildLog,
    pub jobs: JobQueue,
    pub notifications: Notifications,
    pub scheduler: Scheduler,
    pub prebuilds: Prebuilds,
    pub workspaces: Workspaces,
}

impl HostParts {
    /// The parts, picked from a composed control plane and its store.
    pub fn picked_from(control: &abode_control::Control, store: Store) -> HostParts {
        HostParts {
            store,
            config: control.config().clone(),
            builds: control.builds().clone(),
            held: control.held().clone(),
            build_log: control.build_log().clone(),
            jobs: control.jobs().clone(),
            notifications: control.notifications().clone(),
            scheduler: control.scheduler().clone(),
            prebuilds: control.prebuilds().clone(),
            workspaces: control.workspaces().clone(),
        }
    }
}

/// The machine room; cheap to clone.
#[derive(Clone)]
pub struct Host {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) store: Store,
    pub(crate) config: Config,
    pub(crate) builds: Builds,
    pub(crate) held: Held,
    pub(crate) build_log: BuildLog,
    pub(crate) jobs: JobQueue,
    pub(crate) notifications: Notifications,
    pub(crate) scheduler: Scheduler,
    pub(crate) prebuilds: Prebuilds,
    pub(crate) workspaces: Workspaces,
    /// Where the machine room's own audit events are written.
    pub(crate) audit: audit::Audit,
    /// Turns true when the server stops: long-polls answer at once.
    pub(crate) stopping: watch::Sender<bool>,
    /// Set while the data dir has less than `Config::min_free_disk` free.
    pub(crate) low_on_disk: AtomicBool,
}

impl Host {
    pub fn new(parts: HostParts) -> Host {
        Host {
            inner: Arc::new(Inner {
                audit: audit::Audit::new(parts.store.clone()),
                store: parts.store,
                config: parts.config,
                builds: parts.builds,
                held: parts.held,
                build_log: parts.build_log,
                jobs: parts.jobs,
                notifications: parts.notifications,
                scheduler: parts.scheduler,
                prebuilds: parts.prebuilds,
                workspaces: parts.workspaces,
                stopping: watch::channel(false).0,
                low_on_disk: AtomicBool::new(false),
            }),
        }
    }

    pub(crate) fn builds(&self) -> &Builds {
        &self.inner.builds
    }

    pub(crate) fn held(&self) -> &Held {
        &self.inner.held
    }

    pub(crate) fn build_log(&self) -> &BuildLog {
        &self.inner.build_log
    }

    pub(crate) fn jobs(&self) -> &JobQueue {
        &self.inner.jobs
    }

    pub(crate) fn notifications(&self) -> &Notifications {
        &self.inner.notifications
    }

    pub(crate) fn scheduler(&self) -> &Scheduler {
        &self.inner.scheduler
    }

    pub(crate) fn prebuilds(&self) -> &Prebuilds {
        &self.inner.prebuilds
    }

    pub(crate) fn workspaces(&self) -> &Workspaces {
        &self.inner.workspaces
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.inner.config.clock.now_ms()
    }

    /// An audit event of the server's own doing about a build.
    pub(crate) async fn audit_system(&self, action: &str, build: &Build, details: Option<String>) {
        let (actor, event) = audit::system_event(action, build, details);
        self.inner.audit.record_as(&actor, event).await;
    }

    /// Records what a person did to a workspace, referring to it by id.
    pub(crate) async fn audit_workspace(
        &self,
        caller: &Caller,
        workspace_id: &str,
        action: &str,
        target: &str,
        outcome: &str,
        details: Option<String>,
    ) {
        let event = audit::workspace_event(caller, workspace_id, action, target, outcome, details);
        self.inner.audit.record(&event).await;
    }

    /// Ends the waits of long-polls (a daemon's acquire) so that the
    /// server's graceful stop does not wait for them.
    pub fn stop_long_polls(&self) {
        self.inner.stopping.send_replace(true);
    }
}
