//! Identity: user accounts. Who may exist (names, addresses, passwords of
//! a minimum length), the first user, and the user directory. Sessions,
//! API tokens and the login throttle are in `identity.rs`.

use abode_store::{page_size, NewUser, Page, StoreError, User};

use crate::actors::Actor;
use crate::audit::audit_event;
use crate::names::validate_name;
use crate::secrets;
use crate::Caller;
use crate::Control;
use crate::ControlError;
use crate::MIN_PASSWORD_LENGTH;
use crate::ROLE_MEMBER;
use crate::ROLE_OWNER;
use crate::ROLE_TEMPLATE_ADMIN;

impl Control {
    pub async fn create_first_user(
        &self,
        username: &str,
        email: &str,
        password: &str,
        request_id: Option<String>,
    ) -> Result<(User, String), ControlError> {
        validate_name("username", username)?;
        refuse_reserved(username)?;
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

    /// Makes sure the system actors' reserved accounts exist; a person who
    /// held a reserved name before it was reserved is renamed, said in the
    /// server's log and the audit log.
    pub async fn ensure_system_actors(&self) -> Result<(), ControlError> {
        for (old, new) in self.inner.store.ensure_system_users().await? {
            tracing::warn!(
                "the username \"{old}\" is now reserved for the system: the user who held it is now \"{new}\""
            );
            let event = audit_event(
                None,
                None,
                "user.rename",
                "user",
                &new,
                "success",
                Some(format!("from={old} reason=reserved_name")),
            );
            self.record_as(&Actor::System(abode_store::SystemActor::Server), event)
                .await;
        }
        Ok(())
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
        refuse_reserved(username)?;
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

/// The system actors' names are theirs alone.
fn refuse_reserved(username: &str) -> Result<(), ControlError> {
    match abode_store::SystemActor::by_username(username) {
        Some(actor) => Err(ControlError::Conflict(format!(
            "the username \"{actor}\" is reserved for the system"
        ))),
        None => Ok(()),
    }
}
