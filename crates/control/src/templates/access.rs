//! Template access lists: who sees and builds from a template (`use`) and
//! who pushes and activates its versions and edits the list (`admin`),
//! beside the global roles (owners and template admins: every template).
//! Every template action of a person is asked here with the template's
//! entry for them ([`authz::authorize_template`]); a template a person may
//! not read is "not found", never "forbidden", so that a name does not
//! tell whether it exists.

use abode_store::{AccessSubject, Template, TemplateAccessEntry, TemplateRole};

use crate::authz::{self, Action, Subject};
use crate::error::or_not_found;
use crate::{Actor, Caller, ControlError};

use super::Templates;

/// An entry of an access list to set: whom, by name, and the role (`None`:
/// remove the entry).
#[derive(Debug, Clone)]
pub enum PermissionSubject {
    User(String),
    Group(String),
}

impl Templates {
    /// The template `name`, if `caller` may do `action` on it: "not found"
    /// when they may not even read it, "forbidden" when they may read it but
    /// not do `action`.
    pub async fn template_for(
        &self,
        caller: &Caller,
        name: &str,
        action: Action,
    ) -> Result<Template, ControlError> {
        authz::scope_permits(
            &caller.scope,
            action,
            Some(authz::ScopedObject::Template(name)),
        )?;
        let template = self.template(name).await?;
        self.authorize_on(&caller.subject(), &template, action)
            .await?;
        Ok(template)
    }

    /// Whether `subject` may do `action` on `template`, read from its
    /// access list (see [`Templates::template_for`]).
    pub(crate) async fn authorize_on(
        &self,
        subject: &Subject,
        template: &Template,
        action: Action,
    ) -> Result<(), ControlError> {
        // A token whose scope does not name the template is told so, the
        // same whether the template exists or not.
        if let Subject::User { scope, .. } = subject {
            authz::scope_permits(
                scope,
                action,
                Some(authz::ScopedObject::Template(&template.name)),
            )?;
        }
        let listed = match subject {
            Subject::User { id, .. } => self.store.template_role_of(&template.id, id).await?,
            Subject::System(_) => None,
        };
        if authz::authorize_template(subject, Action::TemplateRead, &template.name, listed).is_err()
        {
            return Err(not_found(&template.name));
        }
        authz::authorize_template(subject, action, &template.name, listed)?;
        Ok(())
    }

    /// The door's question: may `actor` create a workspace from
    /// `template` (`creating`), or start or update one of its workspaces.
    /// A template a person may not read is "not found" when they name it
    /// to create; their own workspace's template is one they know.
    pub async fn may_build_from(
        &self,
        actor: &Actor,
        roles: &authz::Roles,
        template: &Template,
        creating: bool,
    ) -> Result<(), ControlError> {
        let subject = match actor {
            Actor::User(user) => Subject::user(user.id.clone(), roles.clone()),
            Actor::System(system) => Subject::System(*system),
        };
        if creating {
            return self
                .authorize_on(&subject, template, Action::TemplateUse)
                .await;
        }
        let listed = match actor {
            Actor::User(user) => self.store.template_role_of(&template.id, &user.id).await?,
            Actor::System(_) => None,
        };
        authz::authorize_template(&subject, Action::TemplateUse, &template.name, listed)?;
        Ok(())
    }

    /// A template's access list (its admins, owners and template admins).
    pub async fn template_permissions(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<(Template, Vec<TemplateAccessEntry>), ControlError> {
        let template = self
            .template_for(caller, name, Action::TemplatePermissionsEdit)
            .await?;
        let entries = self.store.template_access(&template.id).await?;
        Ok((template, entries))
    }

    /// Sets one entry of a template's access list (`None`: removes it),
    /// audited with the entry's role before and after; the list after.
    pub async fn set_template_permission(
        &self,
        caller: &Caller,
        name: &str,
        whom: &PermissionSubject,
        role: Option<TemplateRole>,
    ) -> Result<(Template, Vec<TemplateAccessEntry>), ControlError> {
        let template = self
            .template_for(caller, name, Action::TemplatePermissionsEdit)
            .await?;
        let (subject, described) = match whom {
            PermissionSubject::User(username) => {
                let user = or_not_found(self.store.user_by_name(username).await, || {
                    format!("user \"{username}\" not found")
                })?;
                if user.system {
                    return Err(ControlError::BadRequest(format!(
                        "\"{username}\" is a system actor: the system builds from every template"
                    )));
                }
                (AccessSubject::User(user.id), format!("user={username}"))
            }
            PermissionSubject::Group(group) => {
                let found = or_not_found(self.store.group_by_name(group).await, || {
                    format!("group \"{group}\" not found")
                })?;
                (AccessSubject::Group(found.id), format!("group={group}"))
            }
        };
        let before = self
            .store
            .set_template_access(&template.id, &subject, role)
            .await?;
        let role_name = |role: Option<TemplateRole>| role.map_or("none", TemplateRole::as_str);
        let details = Some(format!(
            "{described} before={} after={}",
            role_name(before),
            role_name(role)
        ));
        self.audit_template(caller, "template.permissions", name, "success", details)
            .await;
        let entries = self.store.template_access(&template.id).await?;
        Ok((template, entries))
    }
}

fn not_found(name: &str) -> ControlError {
    ControlError::NotFound(format!("template \"{name}\" not found"))
}
