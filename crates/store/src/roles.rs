//! Users' roles: a set per user, kept as rows of `user_roles` so that a new
//! role is new rows rather than a table rebuild.
//!
//! The role names are parsed here, at the store's boundary: a stored name no
//! [`Role`] knows fails the read with an error naming it. What a role allows
//! is not the store's business (that is `abode_control::authz`); the one rule
//! kept here is the one a concurrent pair of requests could otherwise break:
//! the last owner cannot lose `owner`, checked and written in one transaction
//! ([`check_role_change`], used inside `change_roles`/`set_roles`).
//!
//! `users.role`, the single role of the first schema, stays in the table
//! (migrations are append-only) but decides nothing any more; every role
//! change keeps it at [`Roles::legacy_role`] so that it stays truthful for
//! someone reading the table.

/// A role and a user's set of them are the contract's vocabulary (one
/// definition for every layer); stored as each role's name.
pub use abode_contract::{Role, Roles, UnknownRole};

/// A role change the rules refuse, whoever asks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleRefusal {
    #[error("the last owner cannot lose the owner role: make another user an owner first")]
    LastOwner,
    #[error("a user holds at least one role (member: their own workspaces)")]
    NoRoles,
}

/// What a role change did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleChange {
    pub before: Roles,
    pub after: Roles,
}

/// Whether a user's roles may go from `before` to `after` while `owners`
/// users (this one included, if it is one) hold `owner`.
pub fn check_role_change(before: &Roles, after: &Roles, owners: u64) -> Result<(), RoleRefusal> {
    if after.is_empty() {
        return Err(RoleRefusal::NoRoles);
    }
    let loses_owner = before.contains(Role::Owner) && !after.contains(Role::Owner);
    if loses_owner && owners <= 1 {
        return Err(RoleRefusal::LastOwner);
    }
    Ok(())
}

/// The role methods of [`crate::Store`]; expanded inside each backend's
/// `impl` next to `shared_queries!`, with the database type and the statement
/// (if any) that makes concurrent role changes wait for each other.
macro_rules! role_queries {
    ($db:ty, $owners_lock:expr) => {
        pub(crate) async fn roles_of(&self, user_id: &str) -> Result<Roles, StoreError> {
            let roles: Vec<Role> =
                sqlx::query_scalar(&sql("SELECT role FROM user_roles WHERE user_id = ?"))
                    .bind(user_id)
                    .fetch_all(&self.pool)
                    .await
                    .map_err(db_error("user roles"))?;
            Ok(roles.into_iter().collect())
        }

        pub(crate) async fn set_roles(
            &self,
            user_id: &str,
            roles: &Roles,
        ) -> Result<Result<RoleChange, RoleRefusal>, StoreError> {
            self.edit_roles(user_id, |_| roles.clone()).await
        }

        pub(crate) async fn change_roles(
            &self,
            user_id: &str,
            add: &Roles,
            remove: &Roles,
        ) -> Result<Result<RoleChange, RoleRefusal>, StoreError> {
            self.edit_roles(user_id, |before| before.changed(add, remove))
                .await
        }

        /// Reads the user's roles, checks the change and writes it, in one
        /// transaction that other role changes wait for: two owners removing
        /// each other at once leave one owner, not none.
        async fn edit_roles(
            &self,
            user_id: &str,
            edit: impl FnOnce(&Roles) -> Roles,
        ) -> Result<Result<RoleChange, RoleRefusal>, StoreError> {
            let mut tx = self
                .pool
                .begin_with(BEGIN_WRITE)
                .await
                .map_err(StoreError::Database)?;
            let owners_lock: Option<&str> = $owners_lock;
            if let Some(lock) = owners_lock {
                sqlx::query(lock)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::Database)?;
            }
            sqlx::query(&sql("SELECT id FROM users WHERE id = ?"))
                .bind(user_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error("user"))?;
            let before: Roles = sqlx::query_scalar::<_, Role>(&sql(
                "SELECT role FROM user_roles WHERE user_id = ?",
            ))
            .bind(user_id)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error("user roles"))?
            .into_iter()
            .collect();
            let after = edit(&before);
            // Owners who can act: a suspended or deleted owner keeps the
            // role but signs nobody in.
            let owners: i64 = sqlx::query_scalar(&sql(
                "SELECT COUNT(*) FROM user_roles r JOIN users u ON u.id = r.user_id \
                 WHERE r.role = ? AND u.status IN ('active', 'dormant')",
            ))
            .bind(Role::Owner.as_str())
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error("user roles"))?;
            if let Err(refusal) =
                check_role_change(&before, &after, u64::try_from(owners).unwrap_or(0))
            {
                // Dropping the transaction rolls it back.
                return Ok(Err(refusal));
            }
            for role in before.iter().filter(|role| !after.contains(*role)) {
                sqlx::query(&sql(
                    "DELETE FROM user_roles WHERE user_id = ? AND role = ?",
                ))
                .bind(user_id)
                .bind(role.as_str())
                .execute(&mut *tx)
                .await
                .map_err(db_error("user roles"))?;
            }
            let added: Roles = after
                .iter()
                .filter(|role| !before.contains(*role))
                .collect();
            Self::insert_roles(&mut tx, user_id, &added).await?;
            sqlx::query(&sql("UPDATE users SET role = ? WHERE id = ?"))
                .bind(after.legacy_role())
                .bind(user_id)
                .execute(&mut *tx)
                .await
                .map_err(db_error("user"))?;
            tx.commit().await.map_err(StoreError::Database)?;
            Ok(Ok(RoleChange { before, after }))
        }

        /// Grants `roles` inside the caller's transaction (a new user's roles are
        /// written in the transaction that creates the user).
        pub(crate) async fn insert_roles(
            tx: &mut sqlx::Transaction<'_, $db>,
            user_id: &str,
            roles: &Roles,
        ) -> Result<(), StoreError> {
            for role in roles.iter() {
                sqlx::query(&sql("INSERT INTO user_roles (user_id, role) VALUES (?, ?)"))
                    .bind(user_id)
                    .bind(role.as_str())
                    .execute(&mut **tx)
                    .await
                    .map_err(db_error("user role"))?;
            }
            Ok(())
        }
    };
}

pub(crate) use role_queries;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn role_names_round_trip_and_unknown_ones_are_named() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
        }
        for bad in ["admin", "Owner", "", "template_admin", "owner "] {
            let error = bad.parse::<Role>().unwrap_err().to_string();
            assert!(error.contains(&format!("`{bad}`")), "{error}");
        }
    }

    #[test]
    fn lists_parse_display_and_change() {
        let roles: Roles = "member, owner".parse().unwrap();
        assert_eq!(roles, Roles::from([Role::Owner, Role::Member]));
        assert_eq!(roles.to_string(), "owner, member");
        assert_eq!(Roles::new().to_string(), "(none)");
        assert!("member,admin"
            .parse::<Roles>()
            .unwrap_err()
            .to_string()
            .contains("`admin`"));
        let changed = roles.changed(
            &Roles::from([Role::Auditor, Role::Owner]),
            &Roles::from([Role::Owner, Role::Member]),
        );
        assert_eq!(changed, Roles::from([Role::Owner, Role::Auditor]));
    }

    #[test]
    fn the_legacy_column_keeps_the_nearest_old_name() {
        let cases: [(&[Role], &str); 5] = [
            (&[Role::Member, Role::Owner], "owner"),
            (&[Role::TemplateAdmin, Role::Auditor], "template-admin"),
            (&[Role::UserAdmin], "member"),
            (&[Role::Auditor], "member"),
            (&[Role::Member], "member"),
        ];
        for (roles, legacy) in cases {
            let roles: Roles = roles.iter().copied().collect();
            assert_eq!(roles.legacy_role(), legacy, "{roles}");
        }
    }

    #[test]
    fn role_change_rules() {
        let owner = Roles::from([Role::Owner]);
        let member = Roles::from([Role::Member]);
        // (before, after, owners, expected)
        let cases = [
            (&owner, &member, 1, Err(RoleRefusal::LastOwner)),
            (&owner, &member, 0, Err(RoleRefusal::LastOwner)),
            (&owner, &member, 2, Ok(())),
            (&member, &owner, 0, Ok(())),
            (&member, &member, 0, Ok(())),
            (&owner, &owner, 1, Ok(())),
            (&member, &Roles::new(), 3, Err(RoleRefusal::NoRoles)),
        ];
        for (before, after, owners, expected) in cases {
            assert_eq!(
                check_role_change(before, after, owners),
                expected,
                "{before} -> {after} with {owners} owners"
            );
        }
    }
}
