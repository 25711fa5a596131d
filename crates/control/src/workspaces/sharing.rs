//! A workspace's share list (issue 49, `abode sharing`): read and changed
//! by whoever may share it (`workspace.share`: its owner, owners, template
//! admins), unless its template forbids sharing. What an entry lets its
//! holder do is `abode-authz`'s, asked by `resolve`; a removed or narrowed
//! entry makes open connections check again at once.

use abode_store::{AccessSubject, ShareEntry, ShareRole, Workspace};

use super::Workspaces;
use crate::audit::workspace_event;
use crate::authz::Action;
use crate::error::or_not_found;
use crate::{Caller, ControlError, PermissionSubject};

/// A workspace and its share list, groups then users, by name.
#[derive(Debug, Clone)]
pub struct Sharing {
    pub workspace: Workspace,
    pub entries: Vec<ShareEntry>,
}

impl Workspaces {
    /// The share list of a workspace the caller may share.
    pub async fn sharing(&self, caller: &Caller, reference: &str) -> Result<Sharing, ControlError> {
        let workspace = self
            .resolve(caller, reference, Action::WorkspaceShare)
            .await?;
        let entries = self.inner.store.workspace_shares(&workspace.id).await?;
        Ok(Sharing { workspace, entries })
    }

    /// Sets (`None`: removes) one entry of a workspace's share list,
    /// audited with its role before and after; the list after.
    pub async fn share(
        &self,
        caller: &Caller,
        reference: &str,
        whom: &PermissionSubject,
        role: Option<ShareRole>,
    ) -> Result<Sharing, ControlError> {
        let workspace = self
            .resolve(caller, reference, Action::WorkspaceShare)
            .await?;
        let store = &self.inner.store;
        if role.is_some()
            && !store
                .template_allows_sharing(&workspace.template_id)
                .await?
        {
            return Err(ControlError::Forbidden(format!(
                "template \"{}\" does not allow sharing its workspaces",
                workspace.template_name
            )));
        }
        let (subject, described) = match whom {
            PermissionSubject::User(username) => {
                let user = or_not_found(store.user_by_name(username).await, || {
                    format!("user \"{username}\" not found")
                })?;
                if user.system || user.id == workspace.owner_id {
                    return Err(ControlError::BadRequest(format!(
                        "\"{username}\" cannot be given a share of a workspace: it is theirs or the system's"
                    )));
                }
                (AccessSubject::User(user.id), format!("user={username}"))
            }
            PermissionSubject::Group(group) => {
                let found = or_not_found(store.group_by_name(group).await, || {
                    format!("group \"{group}\" not found")
                })?;
                (AccessSubject::Group(found.id), format!("group={group}"))
            }
        };
        let before = store
            .set_workspace_share(&workspace.id, &subject, role)
            .await?;
        if role.is_none() && before.is_none() {
            let (kind, name) = match whom {
                PermissionSubject::User(name) => ("user", name),
                PermissionSubject::Group(name) => ("group", name),
            };
            return Err(ControlError::NotFound(format!(
                "{kind} \"{name}\" holds no share of workspace \"{reference}\""
            )));
        }
        if role < before {
            self.inner.identity.access_narrowed();
        }
        let name = |role: Option<ShareRole>| role.map_or("none", ShareRole::as_str);
        let target = format!("{}/{}", workspace.owner_name, workspace.name);
        let details = format!("{described} before={} after={}", name(before), name(role));
        let event = workspace_event(
            caller,
            &workspace.id,
            "workspace.share",
            &target,
            "success",
            Some(details),
        );
        self.inner.audit.record(&event).await;
        let entries = store.workspace_shares(&workspace.id).await?;
        Ok(Sharing { workspace, entries })
    }
}
