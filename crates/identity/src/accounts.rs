//! Account status: user admins suspend, activate and delete people; people
//! not seen for the dormancy period become dormant and wake at their next
//! sign-in or request; a person changes their own password.
//!
//! A status is enforced where credentials are checked (`sessions.rs`): a
//! suspended or deleted account's sessions and API tokens are refused from
//! the next request, and what outlives a request (a live log, an `abode
//! ssh` connection) is told through the revocation signal and looks again.

use std::time::Duration;

use abode_store::{AccountStatus, StatusChange, StatusRefusal, SystemActor, User, UserEntry};

use crate::audit::audit_event;
use crate::authz::Action;
use crate::error::or_not_found;
use crate::users::validate_password;
use crate::{secrets, Actor, Caller, Identity, IdentityError};

/// How often at most a person's last sighting is written.
pub(crate) const SEEN_INTERVAL: Duration = Duration::from_secs(60 * 60);

/// What a user admin may set an account to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusCommand {
    Suspend,
    Activate,
    Delete,
}

impl StatusCommand {
    fn status(self) -> AccountStatus {
        match self {
            StatusCommand::Suspend => AccountStatus::Suspended,
            StatusCommand::Activate => AccountStatus::Active,
            StatusCommand::Delete => AccountStatus::Deleted,
        }
    }

    fn verb(self) -> &'static str {
        match self {
            StatusCommand::Suspend => "suspend",
            StatusCommand::Activate => "activate",
            StatusCommand::Delete => "delete",
        }
    }
}

impl Identity {
    /// One person's account, roles and groups (`user.list`: owners and
    /// user admins; anyone may read their own).
    pub async fn user_named(
        &self,
        caller: &Caller,
        username: &str,
    ) -> Result<UserEntry, IdentityError> {
        if caller.user.username != username {
            caller.authorize(Action::UserList, None)?;
        }
        let user = or_not_found(self.store.user_by_name(username).await, || {
            format!("user \"{username}\" not found")
        })?;
        if user.system {
            return Err(IdentityError::NotFound(format!(
                "user \"{username}\" not found"
            )));
        }
        let roles = self.store.roles_of(&user.id).await?;
        let groups = self.store.user_group_names(&user.id).await?;
        Ok(UserEntry {
            user,
            roles,
            groups,
        })
    }

    /// Suspends, activates or deletes the person named `username` (owners
    /// and user admins), on the record. Nobody changes their own status,
    /// and the last owner who can act stays so (checked with the write).
    pub async fn set_user_status(
        &self,
        caller: &Caller,
        username: &str,
        command: StatusCommand,
    ) -> Result<StatusChange, IdentityError> {
        caller.authorize(Action::UserChangeStatus, None)?;
        let user = or_not_found(self.store.user_by_name(username).await, || {
            format!("user \"{username}\" not found")
        })?;
        if user.system {
            return Err(IdentityError::Conflict(format!(
                "\"{username}\" is a system actor's account: it cannot be suspended or deleted"
            )));
        }
        // An owner's account is an owner's to suspend or delete: a user
        // admin manages people, not the ones above them.
        if !caller.roles.contains(crate::authz::Role::Owner)
            && self
                .store
                .roles_of(&user.id)
                .await?
                .contains(crate::authz::Role::Owner)
        {
            return Err(IdentityError::Forbidden(format!(
                "you may not {} \"{username}\": only an owner changes an owner's account",
                command.verb()
            )));
        }
        if user.id == caller.user.id && command != StatusCommand::Activate {
            return Err(IdentityError::Conflict(format!(
                "you cannot {} your own account: ask another user admin",
                command.verb()
            )));
        }
        let change = match self
            .store
            .set_account_status(&user.id, command.status(), self.clock.now_ms())
            .await
        {
            Ok(Ok(change)) => change,
            Ok(Err(refusal)) => {
                let message = match refusal {
                    StatusRefusal::LastOwner => format!(
                        "\"{username}\" is the last owner and cannot be suspended or deleted: make another user an owner first"
                    ),
                    StatusRefusal::OwnsWorkspaces(count) => format!(
                        "\"{username}\" owns {count} workspace(s): delete them first (abode list --all)"
                    ),
                    StatusRefusal::Deleted => {
                        format!("\"{username}\" was deleted and cannot be changed")
                    }
                };
                return Err(IdentityError::Conflict(message));
            }
            Err(abode_store::StoreError::NotFound(_)) => {
                return Err(IdentityError::NotFound(format!(
                    "user \"{username}\" not found"
                )))
            }
            Err(other) => return Err(other.into()),
        };
        if !change.after.may_sign_in() {
            // What outlives a request on this person's token looks again.
            self.revoked();
        }
        self.audit
            .record(&audit_event(
                Some(&caller.user),
                caller.request_id.clone(),
                &format!("user.{}", command.verb()),
                "user",
                username,
                "success",
                Some(format!("before={} after={}", change.before, change.after)),
            ))
            .await;
        Ok(change)
    }

    /// Changes the caller's own password, given the current one; every
    /// other session of theirs ends (the one they did it with stays).
    pub async fn change_own_password(
        &self,
        token: &str,
        current: &str,
        new: &str,
        request_id: Option<String>,
    ) -> Result<u64, IdentityError> {
        let credential = self.credential(token).await?;
        let user = credential.user;
        if user.password_hash.is_empty() {
            return Err(IdentityError::Conflict(
                "your account signs in through your identity provider and has no password here"
                    .into(),
            ));
        }
        let stored = user.password_hash.clone();
        let current = current.to_string();
        let matches = self
            .hashing
            .run(move |memory| secrets::verify_password(&current, &stored, memory))
            .await?;
        if !matches {
            self.audit
                .record(&audit_event(
                    Some(&user),
                    request_id,
                    "user.password",
                    "user",
                    &user.username,
                    "failure",
                    Some("the current password was wrong".into()),
                ))
                .await;
            return Err(IdentityError::Forbidden(
                "the current password is wrong".into(),
            ));
        }
        validate_password(new)?;
        let hash = self.hash_password(new).await?;
        let ended = self
            .store
            .set_password(
                &user.id,
                &hash,
                self.clock.now_ms(),
                Some(&credential.token.id),
            )
            .await?;
        self.revoked();
        self.audit
            .record(&audit_event(
                Some(&user),
                request_id,
                "user.password",
                "user",
                &user.username,
                "success",
                Some(format!("sessions_ended={ended}")),
            ))
            .await;
        Ok(ended)
    }

    /// The dormancy sweep: people not seen for `period` become dormant,
    /// each on the record. Run by the scheduler at its ticks.
    pub async fn mark_dormant_accounts(&self, period: Duration) -> Result<u64, IdentityError> {
        let period = i64::try_from(period.as_millis()).unwrap_or(i64::MAX);
        let unseen_since = self.clock.now_ms().saturating_sub(period);
        let names = self.store.mark_accounts_dormant(unseen_since).await?;
        for name in &names {
            let event = audit_event(
                None,
                None,
                "user.dormant",
                "user",
                name,
                "success",
                Some("before=active after=dormant".into()),
            );
            self.audit
                .record_as(&Actor::System(SystemActor::Server), event)
                .await;
        }
        Ok(names.len() as u64)
    }

    /// A credential was just used by `user`: record the sighting (at most
    /// every [`SEEN_INTERVAL`]) and wake a dormant account, on the record.
    pub(crate) async fn seen(&self, user: &User) -> Result<(), IdentityError> {
        let now = self.clock.now_ms();
        let not_since =
            now.saturating_sub(i64::try_from(SEEN_INTERVAL.as_millis()).unwrap_or(i64::MAX));
        let recent = user.last_seen_at.is_some_and(|at| at >= not_since);
        if user.status == AccountStatus::Active && recent {
            return Ok(());
        }
        if self.store.mark_seen(&user.id, now, not_since).await? {
            self.audit
                .record(&audit_event(
                    Some(user),
                    None,
                    "user.activate",
                    "user",
                    &user.username,
                    "success",
                    Some("before=dormant after=active (signed in)".into()),
                ))
                .await;
        }
        Ok(())
    }
}

/// The one line a refused account's request gets.
pub(crate) fn refused(status: AccountStatus) -> IdentityError {
    match status {
        AccountStatus::Deleted => IdentityError::Unauthorized("this account was deleted".into()),
        _ => IdentityError::Unauthorized(
            "your account is suspended: ask a user admin to activate it".into(),
        ),
    }
}
