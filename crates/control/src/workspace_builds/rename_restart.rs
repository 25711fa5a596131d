//! Renaming and restarting a workspace, both as builds through the door, so
//! that the guard judges them like any other (issue 33).
//!
//! A rename is a build of the workspace's current transition (a start if it
//! runs, a stop if it is stopped) planned under the new name: a template
//! that puts the name in a volume's identity plans to replace that volume,
//! and the guard holds the rename for a confirmation of that exact plan.
//! The workspace takes its new name only when that build succeeds, in the
//! store's statement that records the end (`finish_build`), so a failed,
//! canceled, expired or recovered-as-failed rename leaves the old name.
//!
//! A restart is a stop whose build row says a start follows
//! (`then_start`): once the stop succeeds, the start is requested through
//! the door as the person who asked for the restart. A failed or held stop
//! starts nothing. The chain is on the row, so a server that died between
//! the two requests the start when it comes back
//! (the machine room, `abode-host`).

use std::collections::BTreeMap;

use abode_store::{Build, BuildReason, Transition};

use super::WorkspaceBuilds;
use crate::authz::Action;
use crate::builds::{BuildOrder, BuildTarget, VersionChoice};
use crate::validate_name;
use crate::workspace_status;
use crate::{Actor, Caller, ControlError};

impl WorkspaceBuilds {
    /// A person's rename of a workspace they may start and stop: the
    /// rename's build (see the module doc).
    pub async fn request_rename(
        &self,
        caller: &Caller,
        reference: &str,
        new_name: &str,
    ) -> Result<Build, ControlError> {
        validate_name("workspace name", new_name)?;
        let workspace = self
            .workspaces()
            .resolve(caller, reference, Action::WorkspaceStop)
            .await?;
        caller.authorize_workspace(Action::WorkspaceStart, &workspace.owner_id, &workspace.id)?;
        if workspace.name == new_name {
            return Err(ControlError::BadRequest(format!(
                "workspace \"{new_name}\" already has that name"
            )));
        }
        if self
            .inner
            .store
            .workspace_name_in_use(&workspace.owner_id, new_name, &workspace.id)
            .await?
        {
            return Err(ControlError::Conflict(
                if workspace.owner_id == caller.user.id {
                    format!("you already have a workspace named \"{new_name}\"")
                } else {
                    format!(
                        "user \"{}\" already has a workspace named \"{new_name}\"",
                        workspace.owner_name
                    )
                },
            ));
        }
        let latest = self.inner.store.latest_build(&workspace.id).await?;
        let last_succeeded = self
            .inner
            .store
            .latest_succeeded_build(&workspace.id)
            .await?;
        let transition =
            workspace_status::check_rename_build(&workspace, &latest, last_succeeded.as_ref())?;
        let old_name = workspace.name.clone();
        let workspace_id = workspace.id.clone();
        let build = self
            .builds()
            .request(
                BuildTarget::Existing(workspace),
                BuildOrder {
                    actor: Actor::User(caller.user.clone()),
                    request_id: caller.request_id.clone(),
                    transition,
                    version: VersionChoice::Current,
                    reason: BuildReason::Rename,
                    parameters: BTreeMap::new(),
                    retention: None,
                    rename_to: Some(new_name.to_string()),
                    then_start: false,
                },
            )
            .await?;
        self.audit_workspace(
            caller,
            &workspace_id,
            "workspace.rename",
            &format!("{}/{old_name}", build.owner_name),
            "success",
            Some(format!(
                "from={old_name} to={new_name} build={} (the name changes when the build succeeds)",
                build.number
            )),
        )
        .await;
        Ok(build)
    }

    /// A person's restart of a running workspace they may start and stop:
    /// its stop, which a start follows once it succeeded.
    pub async fn request_restart(
        &self,
        caller: &Caller,
        reference: &str,
    ) -> Result<Build, ControlError> {
        let workspace = self
            .workspaces()
            .resolve(caller, reference, Action::WorkspaceStop)
            .await?;
        // Through its share list too (an `admin` share restarts it).
        self.workspaces()
            .resolve(caller, reference, Action::WorkspaceStart)
            .await?;
        self.builds()
            .request(
                BuildTarget::Existing(workspace),
                BuildOrder {
                    actor: Actor::User(caller.user.clone()),
                    request_id: caller.request_id.clone(),
                    transition: Transition::Stop,
                    version: VersionChoice::Current,
                    reason: BuildReason::Restart,
                    parameters: BTreeMap::new(),
                    retention: None,
                    rename_to: None,
                    then_start: true,
                },
            )
            .await
    }
}
