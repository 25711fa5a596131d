//! Where a workspace is built: on the host its host-local resources are on.
//!
//! An `abode_volume` is a directory under the volumes dir of the machine
//! whose provisioner built it, and an `abode_process` runs under that
//! machine's process supervisor (`abode_contract::host_local`). Servers and
//! daemons sharing one database each have their own: a build of such a
//! workspace taken by another host would find its volume "deleted outside
//! Terraform" and its process gone. So every machine that runs builds is a
//! **host**, named by the id its data dir already keeps: a server's id
//! (`server-id`) for its built-in provisioners, a daemon's id
//! (`provisioner-id`, sent with every call) for an external daemon. A
//! provisioner reports its host with its heartbeat (`provisioners` rows) and
//! with its claim, and the claim itself (one query, both backends) skips the
//! jobs of a workspace placed on another host.
//!
//! A workspace is placed by the states its builds' runs store
//! (`states.rs`): one that holds host-local resources puts it on the host of
//! the run that wrote it, one that holds none puts it nowhere (but a
//! delete's, which keeps it where what it retained is), in the state's own
//! transaction. A person moves it on purpose ([`Host::move_workspace`]). On
//! SQLite, whose database is one data dir's own, an earlier id of this
//! server (a copy given a new id, a restore) is this server: its workspaces
//! follow it at start; on PostgreSQL another id is another server.
//!
//! A job whose workspace's host has no live provisioner waits: its log says
//! so once, naming the host (one server says it: `note_waiting_for_host`),
//! and it is never run elsewhere, so it is never held as "deleted outside
//! Terraform".

use abode_contract::host_local::is_host_local;
use abode_runner::{LogLevel, LogStage};
use serde::de::IgnoredAny;
use serde::Deserialize;

use crate::room::Host;
use abode_control::authz::Action;
use abode_control::{Caller, ControlError};
use abode_store::{Placement, Transition};

/// A resource of a Terraform state, as far as its place matters.
#[derive(Deserialize)]
pub(crate) struct StateResource {
    #[serde(default)]
    mode: String,
    #[serde(rename = "type", default)]
    resource_type: String,
    #[serde(default)]
    provider: String,
    #[serde(default)]
    instances: Vec<IgnoredAny>,
}

/// Where a state puts its workspace: on the writer's host when one of its
/// managed resources with an instance is host-local.
pub(crate) fn placement_of(resources: &[StateResource]) -> Placement {
    let local = resources.iter().any(|resource| {
        resource.mode == "managed"
            && !resource.instances.is_empty()
            && is_host_local(&resource.resource_type, &resource.provider)
    });
    if local {
        Placement::WritersHost
    } else {
        Placement::Nowhere
    }
}

/// A person's move of a workspace, as done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The host it was on (`None`: none).
    pub from: Option<String>,
    pub to: String,
}

impl Host {
    /// This server's host: its id, which its data dir keeps.
    pub(crate) fn host_id(&self) -> &str {
        &self.inner.config.server_id
    }

    /// At start, once this process runs as its id: on SQLite, whose
    /// database is this data dir's own, the workspaces an earlier id of this
    /// server placed are this server's (a copy given a new id, a restore on
    /// a fresh data dir); on PostgreSQL another id is another server.
    pub(crate) async fn place_own_workspaces(&self) -> Result<(), ControlError> {
        let placed = self
            .inner
            .store
            .place_on_this_server(self.host_id())
            .await?;
        if placed > 0 {
            tracing::info!(
                workspaces = placed,
                host = %self.host_id(),
                "workspaces placed on an earlier id of this server are on its id now"
            );
        }
        Ok(())
    }

    /// Since when a provisioner's heartbeat counts it as connected: one job
    /// lease (a server's keeper beats four times per lease, a daemon's slot
    /// about every second, while it polls and while it runs a job).
    fn live_since(&self) -> i64 {
        let lease_ms = i64::try_from(self.inner.config.job_lease.as_millis()).unwrap_or(i64::MAX);
        self.now_ms().saturating_sub(lease_ms)
    }

    /// Says, in the log of each queued job whose workspace is on a host with
    /// no connected provisioner, that it waits for that host: one line
    /// naming it, written once whichever servers look.
    pub(crate) async fn tell_absent_hosts(&self) {
        let store = &self.inner.store;
        let waiting = match store.jobs_waiting_for_absent_hosts(self.live_since()).await {
            Ok(waiting) => waiting,
            Err(error) => {
                tracing::error!(%error, "cannot read the builds that wait for their host");
                return;
            }
        };
        for (build_id, host) in waiting {
            match store.note_waiting_for_host(&build_id, &host).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(error) => {
                    tracing::error!(build = %build_id, %error, "cannot note that a build waits for its host");
                    continue;
                }
            }
            let notice = format!(
                "waiting for host {host}: this workspace's volumes and processes are there, and no \
                 provisioner of that host is connected; the build starts when one is, or after an \
                 owner moves the workspace (`abode workspaces move WS --to-host HOST`, which does \
                 not carry the data)"
            );
            self.build_log()
                .note(&build_id, &LogStage::SETUP, LogLevel::Warn, &notice)
                .await;
            tracing::warn!(build = %build_id, %host, "a build waits for its workspace's host");
        }
    }

    /// Whether `caller` may move workspaces at all (owners): asked before a
    /// request's body is read.
    pub fn may_move_workspaces(&self, caller: &Caller) -> Result<(), ControlError> {
        Ok(caller.authorize(Action::WorkspaceMove, None)?)
    }

    /// Moves a workspace to the host `to` on purpose (owners; audited): its
    /// builds run there from then on. Nothing is copied: a volume whose
    /// directory is not on the new host reads as gone at its next build,
    /// which the guard holds for confirmation. Refused while a build is
    /// pending, running or held, when `to` has no connected provisioner,
    /// and while the workspace is started on a host that is connected (stop
    /// it first: its processes run there).
    pub async fn move_workspace(
        &self,
        caller: &Caller,
        reference: &str,
        to: &str,
    ) -> Result<Moved, ControlError> {
        let workspace = self
            .workspaces()
            .resolve(caller, reference, Action::WorkspaceMove)
            .await?;
        if !abode_control::tags::is_label(to) {
            return Err(ControlError::BadRequest(
                "a host is 1-64 of a-z A-Z 0-9 - _ . (`abode provisioner list` shows the hosts)"
                    .into(),
            ));
        }
        let named = format!("{}/{}", workspace.owner_name, workspace.name);
        if workspace.deleted {
            return Err(ControlError::Conflict(format!(
                "workspace \"{named}\" was deleted"
            )));
        }
        let from = workspace.host.clone();
        if from.as_deref() == Some(to) {
            return Err(ControlError::Conflict(format!(
                "workspace \"{named}\" is on host {to} already"
            )));
        }
        let store = &self.inner.store;
        let latest = store.latest_build(&workspace.id).await?;
        if !latest.status.is_final() {
            return Err(ControlError::Conflict(format!(
                "workspace \"{named}\" has build #{} {}: let it end or cancel it, then move it",
                latest.number, latest.status
            )));
        }
        let since = self.live_since();
        if !store.host_is_live(to, since).await? {
            return Err(ControlError::Conflict(format!(
                "no provisioner of host {to} is connected: a workspace moves only to a host that \
                 runs (`abode provisioner list` shows each provisioner's host)"
            )));
        }
        if let Some(from) = &from {
            let started = store
                .latest_succeeded_build(&workspace.id)
                .await?
                .is_some_and(|build| build.transition == Transition::Start);
            if started && store.host_is_live(from, since).await? {
                return Err(ControlError::Conflict(format!(
                    "workspace \"{named}\" is started on host {from}, which is connected: stop it \
                     first (its processes run there), then move it"
                )));
            }
        }
        if !store
            .move_workspace(&workspace.id, from.as_deref(), to)
            .await?
        {
            return Err(ControlError::Conflict(format!(
                "workspace \"{named}\" changed meanwhile (a build was asked for, or it moved): \
                 look again with `abode show {named}`"
            )));
        }
        self.audit_workspace(
            caller,
            &workspace.id,
            "workspace.move",
            &named,
            "success",
            Some(format!("from={} to={to}", from.as_deref().unwrap_or("-"))),
        )
        .await;
        Ok(Moved {
            from,
            to: to.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources(json: &str) -> Vec<StateResource> {
        #[derive(Deserialize)]
        struct State {
            resources: Vec<StateResource>,
        }
        match serde_json::from_str::<State>(json) {
            Ok(state) => state.resources,
            Err(error) => panic!("{error}"),
        }
    }

    #[test]
    fn a_state_with_a_volume_or_a_process_of_the_abode_provider_is_placed() {
        let abode = r#"provider[\"registry.terraform.io/abode/abode\"]"#;
        let cases = [
            (
                format!(
                    r#"{{"resources":[{{"mode":"managed","type":"abode_volume","name":"home","provider":"{abode}","instances":[{{}}]}}]}}"#
                ),
                Placement::WritersHost,
            ),
            (
                format!(
                    r#"{{"resources":[{{"mode":"managed","type":"abode_process","name":"p","provider":"{abode}","instances":[{{"index_key":0}}]}}]}}"#
                ),
                Placement::WritersHost,
            ),
            // No instance left (a count of 0), a data source, an agent.
            (
                format!(
                    r#"{{"resources":[{{"mode":"managed","type":"abode_process","name":"p","provider":"{abode}","instances":[]}}]}}"#
                ),
                Placement::Nowhere,
            ),
            (
                format!(
                    r#"{{"resources":[{{"mode":"data","type":"abode_volume","name":"v","provider":"{abode}","instances":[{{}}]}}]}}"#
                ),
                Placement::Nowhere,
            ),
            (
                format!(
                    r#"{{"resources":[{{"mode":"managed","type":"abode_agent","name":"a","provider":"{abode}","instances":[{{}}]}}]}}"#
                ),
                Placement::Nowhere,
            ),
            (r#"{"resources":[]}"#.to_string(), Placement::Nowhere),
        ];
        for (state, placement) in cases {
            assert_eq!(placement_of(&resources(&state)), placement, "{state}");
        }
    }
}
