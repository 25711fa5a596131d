//! The way back in for an owner locked out: `abode server create-admin-user`
//! and `abode server reset-password`, run on the server's machine against
//! its database rather than through the API. Whoever can open the database
//! already holds the platform, so these ask for no session; each is in the
//! audit log as the server itself, so that the next owner can see it.

use abode_store::{NewUser, StoreError, SystemActor, User};

use crate::actors::Actor;
use crate::audit::audit_event;
use crate::authz::{Role, Roles};
use crate::IdentityError;

use super::users::check_new_account;
use super::Identity;

/// Names the way these were run, in the audit log's details.
const VIA: &str = "via=server_command";

impl Identity {
    /// A new owner (and member) with `password`; `Conflict` if the name is
    /// taken (a locked-out owner's password is reset instead).
    pub async fn create_admin_user(
        &self,
        username: &str,
        email: &str,
        password: &str,
    ) -> Result<User, IdentityError> {
        check_new_account(username, email, password)?;
        let password_hash = self.hash_password(password).await?;
        let user = match self
            .store
            .create_user(&NewUser {
                username: username.into(),
                email: email.into(),
                roles: Roles::from([Role::Owner, Role::Member]),
                password_hash,
            })
            .await
        {
            Err(StoreError::Conflict(_)) => {
                return Err(IdentityError::Conflict(format!(
                    "username \"{username}\" is taken (abode server reset-password {username} sets a new password)"
                )))
            }
            other => other?,
        };
        let event = audit_event(
            None,
            None,
            "user.create",
            "user",
            username,
            "success",
            Some(format!("roles=owner,member {VIA}")),
        );
        self.audit
            .record_as(&Actor::System(SystemActor::Server), event)
            .await;
        Ok(user)
    }

    /// Sets `username`'s password and ends their sessions; how many ended.
    /// A system actor's account has no password to set.
    pub async fn reset_password(
        &self,
        username: &str,
        password: &str,
    ) -> Result<u64, IdentityError> {
        let user = match self.store.user_by_name(username).await {
            Ok(user) if !user.system => user,
            Ok(_) | Err(StoreError::NotFound(_)) => {
                return Err(IdentityError::NotFound(format!(
                    "no user named \"{username}\""
                )))
            }
            Err(error) => return Err(error.into()),
        };
        super::users::validate_password(password)?;
        let password_hash = self.hash_password(password).await?;
        let ended = self
            .store
            .set_password(&user.id, &password_hash, self.clock.now_ms(), None)
            .await?;
        let event = audit_event(
            None,
            None,
            "user.password_reset",
            "user",
            username,
            "success",
            Some(format!("sessions_ended={ended} {VIA}")),
        );
        self.audit
            .record_as(&Actor::System(SystemActor::Server), event)
            .await;
        Ok(ended)
    }
}
