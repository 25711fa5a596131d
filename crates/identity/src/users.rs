//! User accounts: who may exist (names, addresses, passwords of a minimum
//! length), the first user, the system actors' accounts, roles, and the user
//! directory.

use abode_store::{page_size, NewUser, Page, StoreError, User, UserEntry};

use crate::actors::Actor;
use crate::audit::audit_event;
use crate::authz::{self, Action, Role, RoleChange, RoleRefusal, Roles};
use crate::names::validate_name;
use crate::secrets;
use crate::IdentityError;

use super::{Caller, Identity};

const MIN_PASSWORD_LENGTH: usize = 8;

impl Identity {
    pub async fn create_first_user(
        &self,
        username: &str,
        email: &str,
        password: &str,
        request_id: Option<String>,
    ) -> Result<(User, String), IdentityError> {
        check_new_account(username, email, password)?;
        let password_hash = self.hash_password(password).await?;
        let user = match self
            .store
            .create_first_user(&NewUser {
                username: username.into(),
                email: email.into(),
                roles: Roles::from([Role::Owner, Role::Member]),
                password_hash,
            })
            .await
        {
            Err(StoreError::Conflict(_)) => {
                return Err(IdentityError::Conflict(
                    "the first user already exists; log in instead".into(),
                ))
            }
            other => other?,
        };
        let token = self.issue_token(&user, request_id.clone()).await?;
        self.audit
            .record(&audit_event(
                Some(&user),
                request_id,
                "user.create",
                "user",
                username,
                "success",
                None,
            ))
            .await;
        Ok((user, token))
    }

    /// Hashes a new password on the bounded hashing pool.
    pub(crate) async fn hash_password(&self, password: &str) -> Result<String, IdentityError> {
        let password = password.to_string();
        let hash = self
            .hashing
            .run(move |memory| secrets::hash_password(&password, memory))
            .await??;
        Ok(hash)
    }

    /// Makes sure the system actors' reserved accounts exist; a person who
    /// held a reserved name before it was reserved is renamed, said in the
    /// server's log and the audit log.
    pub async fn ensure_system_actors(&self) -> Result<(), IdentityError> {
        for (old, new) in self.store.ensure_system_users().await? {
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
            self.audit
                .record_as(&Actor::System(abode_store::SystemActor::Server), event)
                .await;
        }
        Ok(())
    }

    /// A new user holding `roles` (user-admins create members; other roles
    /// are granted by owners: [`authz::authorize_user_create`]); the user and
    /// their roles are written in one transaction.
    pub async fn create_user(
        &self,
        caller: &Caller,
        username: &str,
        email: &str,
        password: &str,
        roles: &Roles,
    ) -> Result<User, IdentityError> {
        authz::authorize_user_create(&caller.subject(), roles)?;
        if roles.is_empty() {
            return Err(IdentityError::BadRequest(
                "a user needs at least one role (member: their own workspaces)".into(),
            ));
        }
        check_new_account(username, email, password)?;
        let password_hash = self.hash_password(password).await?;
        let user = match self
            .store
            .create_user(&NewUser {
                username: username.into(),
                email: email.into(),
                roles: roles.clone(),
                password_hash,
            })
            .await
        {
            Err(StoreError::Conflict(_)) => {
                return Err(IdentityError::Conflict(format!(
                    "username \"{username}\" is taken"
                )))
            }
            other => other?,
        };
        self.audit
            .record(&audit_event(
                Some(&caller.user),
                caller.request_id.clone(),
                "user.create",
                "user",
                username,
                "success",
                Some(format!("roles={}", role_list(roles))),
            ))
            .await;
        Ok(user)
    }

    /// Adds and removes roles of the user named `username` (owners only: see
    /// [`Action::UserChangeRoles`]), on the record. The last owner keeps
    /// `owner`, even against another change at the same moment (the store
    /// checks and writes in one transaction).
    pub async fn change_user_roles(
        &self,
        caller: &Caller,
        username: &str,
        add: &Roles,
        remove: &Roles,
    ) -> Result<(User, RoleChange), IdentityError> {
        caller.authorize(Action::UserChangeRoles, None)?;
        let user = crate::error::or_not_found(self.store.user_by_name(username).await, || {
            format!("user \"{username}\" not found")
        })?;
        if user.system {
            return Err(IdentityError::Conflict(format!(
                "\"{username}\" is a system actor's account: its rights are fixed"
            )));
        }
        let change = match self.store.change_roles(&user.id, add, remove).await? {
            Ok(change) => change,
            Err(refusal) => {
                let message = match refusal {
                    RoleRefusal::LastOwner => format!(
                        "\"{username}\" is the last owner and cannot lose the owner role: make another user an owner first"
                    ),
                    RoleRefusal::NoRoles => format!(
                        "\"{username}\" would hold no role: a user holds at least one (member: their own workspaces)"
                    ),
                };
                return Err(IdentityError::Conflict(message));
            }
        };
        self.audit
            .record(&audit_event(
                Some(&caller.user),
                caller.request_id.clone(),
                "user.roles",
                "user",
                username,
                "success",
                Some(format!(
                    "before={} after={}",
                    role_list(&change.before),
                    role_list(&change.after)
                )),
            ))
            .await;
        Ok((user, change))
    }

    /// The roles `user_id` holds now.
    pub async fn roles_of(&self, user_id: &str) -> Result<Roles, IdentityError> {
        Ok(self.store.roles_of(user_id).await?)
    }

    /// One page of users, by username, with their roles (`user.list`:
    /// owners and user-admins; members need no directory of everyone).
    pub async fn list_users(
        &self,
        caller: &Caller,
        after: Option<&str>,
        limit: Option<i64>,
        include_deleted: bool,
    ) -> Result<Page<UserEntry>, IdentityError> {
        caller.authorize(Action::UserList, None)?;
        Ok(self
            .store
            .list_user_page(after, page_size(limit), include_deleted)
            .await?)
    }
}

/// `owner,member`: one audit detail word.
fn role_list(roles: &Roles) -> String {
    roles.iter().map(Role::as_str).collect::<Vec<_>>().join(",")
}

/// `local@domain.tld`: one `@`, a non-empty local part, a dotted domain,
/// no spaces or control characters, at most 254 bytes. Deliverability is
/// not checked; shape is, so that nobody stores a paragraph as an address.
pub(crate) fn validate_email(email: &str) -> Result<(), IdentityError> {
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
        Err(IdentityError::BadRequest(
            "invalid email address: expected name@domain.tld, at most 254 characters".into(),
        ))
    }
}

pub(crate) fn validate_password(password: &str) -> Result<(), IdentityError> {
    if password.chars().count() >= MIN_PASSWORD_LENGTH {
        Ok(())
    } else {
        Err(IdentityError::BadRequest(format!(
            "the password must have at least {MIN_PASSWORD_LENGTH} characters"
        )))
    }
}

/// What a new account must be: a valid, unreserved name, an email address
/// of the right shape and a long enough password.
pub(super) fn check_new_account(
    username: &str,
    email: &str,
    password: &str,
) -> Result<(), IdentityError> {
    validate_name("username", username)?;
    refuse_reserved(username)?;
    validate_email(email)?;
    validate_password(password)
}

/// The system actors' names are theirs alone.
fn refuse_reserved(username: &str) -> Result<(), IdentityError> {
    match abode_store::SystemActor::by_username(username) {
        Some(actor) => Err(IdentityError::Conflict(format!(
            "the username \"{actor}\" is reserved for the system"
        ))),
        None => Ok(()),
    }
}
