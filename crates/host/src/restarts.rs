//! A restart's second half: once a restart's stop succeeded, its start is
//! requested through the door as the person who asked for the restart
//! (the first half, the stop, is `Control::request_restart`). The chain is
//! on the stop's row (`then_start`), so a server that died between the two
//! requests the start when it comes back.

use std::collections::BTreeMap;

use abode_control::{Actor, BuildOrder, BuildTarget, VersionChoice};
use abode_store::{Build, BuildReason, BuildStatus, StoreError, Transition};

use crate::room::Host;
use abode_control::ControlError;

impl Host {
    /// After a build ended: a restart's stop that succeeded has its start
    /// requested.
    pub(crate) async fn build_ended_chain(&self, build: &Build, status: BuildStatus) {
        if build.then_start && status == BuildStatus::Succeeded {
            self.continue_restarts().await;
        }
    }

    /// Requests the start of every restart whose stop succeeded and was
    /// not followed by a build yet: after each such stop's end, and at a
    /// server's start for a server that died in between. Several servers
    /// may try at once: the door lets one build in, the others are told the
    /// workspace has one.
    pub(crate) async fn continue_restarts(&self) {
        let stops = match self.inner.store.restarts_to_continue().await {
            Ok(stops) => stops,
            Err(error) => {
                tracing::error!(%error, "cannot read the restarts waiting for their start");
                return;
            }
        };
        for stop in stops {
            if let Err(error) = self.continue_restart(&stop).await {
                tracing::warn!(build = %stop.id, %error, "the start of a restart was not requested");
            }
        }
    }

    async fn continue_restart(&self, stop: &Build) -> Result<Build, ControlError> {
        let workspace = self.inner.store.workspace_by_id(&stop.workspace_id).await?;
        let actor = match self.inner.store.user_by_id(&stop.initiator_id).await {
            Ok(user) => Actor::User(user),
            Err(StoreError::NotFound(_)) => {
                return Err(ControlError::Conflict(format!(
                    "the person who restarted workspace \"{}\" no longer exists",
                    workspace.name
                )))
            }
            Err(other) => return Err(other.into()),
        };
        self.builds()
            .request(
                BuildTarget::Existing(workspace),
                BuildOrder {
                    actor,
                    request_id: None,
                    transition: Transition::Start,
                    version: VersionChoice::Current,
                    reason: BuildReason::Restart,
                    parameters: BTreeMap::new(),
                    retention: None,
                    rename_to: None,
                    then_start: false,
                },
            )
            .await
    }
}
