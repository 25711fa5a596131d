//! Groups: named sets of people (and the `prebuilds` actor, whose quota
//! later issues count) that template access lists and quotas name instead
//! of one person at a time. The built-in `Everyone` holds every person by
//! definition: it cannot be renamed, deleted or given members. A group's
//! `source` says who keeps its membership: people (`manual`) or single
//! sign-on's group sync (`oidc`, [`Identity::sync_groups`]).
//!
//! Groups live in identity, not in the control plane, because they are
//! facts about people that sign-in (group sync) writes and every domain
//! reads through the policy.

use abode_store::{
    page_size, Group, GroupMember, GroupSource, GroupSync, NewGroup, Page, StoreError, SystemActor,
    TemplateRole, EVERYONE_GROUP,
};

use crate::actors::Actor;
use crate::audit::audit_event;
use crate::authz::Action;
use crate::error::or_not_found;
use crate::names::validate_name;
use crate::{Caller, Identity, IdentityError};

/// The longest display name of a group.
const MAX_DISPLAY_NAME_CHARS: usize = 128;
/// The longest name of a group made by group sync (an identity provider's
/// names are not Abode's).
const MAX_SYNCED_NAME_CHARS: usize = 255;

/// What `abode groups edit` changes; `None` keeps the value.
#[derive(Debug, Clone, Default)]
pub struct GroupEdit {
    pub name: Option<String>,
    pub display_name: Option<String>,
    pub source: Option<GroupSource>,
    pub quota_allowance: Option<i64>,
}

impl Identity {
    /// Whether `caller` may create, edit or delete groups or change their
    /// members: asked before a request's body is read.
    pub fn may_manage_groups(&self, caller: &Caller) -> Result<(), IdentityError> {
        Ok(caller.authorize(Action::GroupManage, None)?)
    }

    /// A new group with no members.
    pub async fn create_group(
        &self,
        caller: &Caller,
        group: &NewGroup,
    ) -> Result<Group, IdentityError> {
        caller.authorize(Action::GroupManage, None)?;
        check_group(group)?;
        let created = match self.store.create_group(group).await {
            Err(StoreError::Conflict(_)) => {
                return Err(IdentityError::Conflict(format!(
                    "a group named \"{}\" already exists",
                    group.name
                )))
            }
            other => other?,
        };
        let details = Some(format!("after={}", describe(&created)));
        self.audit_group(caller, "group.create", &created.name, details)
            .await;
        Ok(created)
    }

    /// Groups by name, one page.
    pub async fn list_groups(
        &self,
        caller: &Caller,
        after: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Page<Group>, IdentityError> {
        caller.authorize(Action::GroupRead, None)?;
        Ok(self.store.list_group_page(after, page_size(limit)).await?)
    }

    /// One group by name.
    pub async fn group(&self, caller: &Caller, name: &str) -> Result<Group, IdentityError> {
        caller.authorize(Action::GroupRead, None)?;
        self.group_named(name).await
    }

    /// A group's members by username, one page (`Everyone`: every person).
    pub async fn group_members(
        &self,
        caller: &Caller,
        name: &str,
        after: Option<&str>,
        limit: Option<i64>,
    ) -> Result<Page<GroupMember>, IdentityError> {
        caller.authorize(Action::GroupRead, None)?;
        let group = self.group_named(name).await?;
        Ok(self
            .store
            .group_member_page(&group.id, after, page_size(limit))
            .await?)
    }

    /// Renames a group or changes its display name, source or quota
    /// allowance.
    pub async fn edit_group(
        &self,
        caller: &Caller,
        name: &str,
        edit: &GroupEdit,
    ) -> Result<Group, IdentityError> {
        caller.authorize(Action::GroupManage, None)?;
        let before = self.editable_group(name, "edited").await?;
        // A new name or source decides who single sign-on puts in it.
        if edit.name.as_ref().is_some_and(|new| *new != before.name)
            || edit.source.is_some_and(|source| source != before.source)
        {
            self.check_lent_rights(caller, &before).await?;
        }
        let new = NewGroup {
            name: edit.name.clone().unwrap_or_else(|| before.name.clone()),
            display_name: edit
                .display_name
                .clone()
                .unwrap_or_else(|| before.display_name.clone()),
            source: edit.source.unwrap_or(before.source),
            quota_allowance: edit.quota_allowance.unwrap_or(before.quota_allowance),
        };
        if let Some(name) = &edit.name {
            validate_name("group name", name)?;
        }
        check_settings(&new)?;
        let after = match self.store.update_group(&before.id, &new).await {
            Err(StoreError::Conflict(_)) => {
                return Err(IdentityError::Conflict(format!(
                    "a group named \"{}\" already exists",
                    new.name
                )))
            }
            other => or_not_found(other, || format!("group \"{name}\" not found"))?,
        };
        let details = Some(format!(
            "before={} after={}",
            describe(&before),
            describe(&after)
        ));
        self.audit_group(caller, "group.edit", &after.name, details)
            .await;
        Ok(after)
    }

    /// Deletes a group, its memberships and its entries in templates'
    /// access lists.
    pub async fn delete_group(&self, caller: &Caller, name: &str) -> Result<(), IdentityError> {
        caller.authorize(Action::GroupManage, None)?;
        let before = self.editable_group(name, "deleted").await?;
        self.check_lent_rights(caller, &before).await?;
        or_not_found(self.store.delete_group(&before.id).await, || {
            format!("group \"{name}\" not found")
        })?;
        let details = Some(format!("before={}", describe(&before)));
        self.revoked();
        self.audit_group(caller, "group.delete", name, details)
            .await;
        Ok(())
    }

    /// Adds and removes members by username, in one transaction; the group
    /// as it is afterwards. A person or the `prebuilds` actor may be a
    /// member; other system actors may not.
    pub async fn change_group_members(
        &self,
        caller: &Caller,
        name: &str,
        add: &[String],
        remove: &[String],
    ) -> Result<Group, IdentityError> {
        caller.authorize(Action::GroupManage, None)?;
        if add.is_empty() && remove.is_empty() {
            return Err(IdentityError::BadRequest(
                "name at least one user to add or remove".into(),
            ));
        }
        let before = self.editable_group(name, "given members").await?;
        self.check_lent_rights(caller, &before).await?;
        let add_ids = self.member_ids(add).await?;
        let remove_ids = self.member_ids(remove).await?;
        or_not_found(
            self.store
                .change_group_members(&before.id, &add_ids, &remove_ids)
                .await,
            || format!("group \"{name}\" not found"),
        )?;
        if !remove_ids.is_empty() {
            // Shares through the group no longer reach them.
            self.revoked();
        }
        let after = self.group_named(&before.name).await?;
        let details = Some(format!(
            "added={} removed={} before_members={} after_members={}",
            add.join(","),
            remove.join(","),
            before.members,
            after.members
        ));
        self.audit_group(caller, "group.members", name, details)
            .await;
        Ok(after)
    }

    /// A group on templates' access lists lends its members those rights:
    /// only someone who holds each of them (or the owner role) changes who
    /// is in it, directly, by its name or source (which single sign-on's
    /// group sync follows), or by deleting it. Else managing groups would
    /// be a way to push templates.
    async fn check_lent_rights(&self, caller: &Caller, group: &Group) -> Result<(), IdentityError> {
        let subject = caller.subject();
        for (template_id, template, role) in self.store.group_template_roles(&group.id).await? {
            let action = match role {
                TemplateRole::Admin => Action::TemplatePermissionsEdit,
                TemplateRole::Use => Action::TemplateUse,
            };
            let listed = self
                .store
                .template_role_of(&template_id, &caller.user.id)
                .await?;
            if crate::authz::authorize_template(&subject, action, &template, listed).is_err() {
                return Err(IdentityError::Forbidden(format!(
                    "group \"{}\" holds `{role}` on template {template}'s access list: changing its members needs `{role}` there yourself, or the owner role",
                    group.name
                )));
            }
        }
        Ok(())
    }

    /// Sets `user_id`'s memberships of `oidc` groups to exactly `names`
    /// (group sync at a single sign-on): missing groups are created as
    /// `oidc` groups when `auto_create`, and ignored otherwise; groups
    /// people keep (`manual`, `Everyone`) are left alone. One transaction,
    /// audited with the memberships before and after.
    pub async fn sync_groups(
        &self,
        user_id: &str,
        names: &[String],
        auto_create: bool,
    ) -> Result<GroupSync, IdentityError> {
        for name in names {
            check_synced_name(name)?;
        }
        let user = or_not_found(self.store.user_by_id(user_id).await, || {
            "user not found".to_string()
        })?;
        let sync = self
            .store
            .sync_user_groups(user_id, names, auto_create)
            .await?;
        if sync.before.iter().any(|group| !sync.after.contains(group)) {
            // Left a group at this sign-on: shares through it no longer
            // reach them, their open connections look again now.
            self.revoked();
        }
        let details = Some(format!(
            "before=[{}] after=[{}] created=[{}]",
            sync.before.join(","),
            sync.after.join(","),
            sync.created.join(",")
        ));
        let event = audit_event(
            Some(&user),
            None,
            "group.sync",
            "user",
            &user.username,
            "success",
            details,
        );
        self.audit
            .record_as(&Actor::System(SystemActor::Server), event)
            .await;
        Ok(sync)
    }

    /// The names of the groups `user_id` is in, `Everyone` included for a
    /// person: what a build tells its template (`abode_workspace_owner.groups`).
    pub async fn group_names_of(&self, user_id: &str) -> Result<Vec<String>, IdentityError> {
        Ok(self.store.user_group_names(user_id).await?)
    }

    async fn group_named(&self, name: &str) -> Result<Group, IdentityError> {
        or_not_found(self.store.group_by_name(name).await, || {
            format!("group \"{name}\" not found")
        })
    }

    /// The group, unless it is the built-in `Everyone`, which cannot be
    /// `what` (edited, deleted, given members).
    async fn editable_group(&self, name: &str, what: &str) -> Result<Group, IdentityError> {
        let group = self.group_named(name).await?;
        if group.is_everyone() {
            return Err(IdentityError::BadRequest(format!(
                "{EVERYONE_GROUP} is built in and holds every person: it cannot be {what}"
            )));
        }
        Ok(group)
    }

    /// The ids of the named users, each a person or the `prebuilds` actor.
    async fn member_ids(&self, usernames: &[String]) -> Result<Vec<String>, IdentityError> {
        let mut ids = Vec::with_capacity(usernames.len());
        for username in usernames {
            let user = or_not_found(self.store.user_by_name(username).await, || {
                format!("user \"{username}\" not found")
            })?;
            if user.system && username != SystemActor::Prebuilds.username() {
                return Err(IdentityError::BadRequest(format!(
                    "\"{username}\" is a system actor: only people and prebuilds can be group members"
                )));
            }
            ids.push(user.id);
        }
        Ok(ids)
    }

    async fn audit_group(
        &self,
        caller: &Caller,
        action: &str,
        group: &str,
        details: Option<String>,
    ) {
        let event = audit_event(
            Some(&caller.user),
            caller.request_id.clone(),
            action,
            "group",
            group,
            "success",
            details,
        );
        self.audit.record(&event).await;
    }
}

/// A group as an audit event shows it.
fn describe(group: &Group) -> String {
    format!(
        "{{name={} display_name={:?} source={} quota_allowance={}}}",
        group.name, group.display_name, group.source, group.quota_allowance
    )
}

fn check_group(group: &NewGroup) -> Result<(), IdentityError> {
    validate_name("group name", &group.name)?;
    check_settings(group)
}

/// A group's settings but its name (a synced group keeps its provider's).
fn check_settings(group: &NewGroup) -> Result<(), IdentityError> {
    let display = &group.display_name;
    if display.chars().count() > MAX_DISPLAY_NAME_CHARS || display.chars().any(char::is_control) {
        return Err(IdentityError::BadRequest(format!(
            "a group's display name is at most {MAX_DISPLAY_NAME_CHARS} characters, without control characters"
        )));
    }
    if group.quota_allowance < 0 {
        return Err(IdentityError::BadRequest(
            "a group's quota allowance is 0 or more".into(),
        ));
    }
    Ok(())
}

fn check_synced_name(name: &str) -> Result<(), IdentityError> {
    let count = name.chars().count();
    if count == 0 || count > MAX_SYNCED_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(IdentityError::BadRequest(format!(
            "a synced group's name is 1-{MAX_SYNCED_NAME_CHARS} characters without control characters (got {:?})",
            name.chars().take(64).collect::<String>()
        )));
    }
    Ok(())
}
