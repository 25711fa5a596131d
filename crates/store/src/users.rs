//! Users: creating them (the first one under a lock, so that two
//! concurrent first-user requests cannot both succeed), finding them by name
//! or id, their page by username, and the legacy `create_token` (a session
//! row without a kind; the other token queries are in `tokens.rs`).

pub(crate) const USER_COLUMNS: &str =
    "id, username, email, role, password_hash, created_at, system, status, last_seen_at";

from_row! {
    /// One row of the user page: a user, one of their roles (none: a user
    /// without roles) and one of the groups they are a member of (none: no
    /// group but `Everyone`).
    pub(crate) struct UserRoleRow {
        user: crate::User = flatten,
        granted: Option<crate::Role>,
        group_name: Option<String>,
    }
}

/// Folds the rows of consecutive users (one per role and group) into
/// entries, in the rows' order; every person who is not deleted is in
/// `Everyone` (which has no member rows).
pub(crate) fn user_entries(rows: Vec<UserRoleRow>) -> Vec<crate::UserEntry> {
    let mut users: Vec<crate::UserEntry> = Vec::new();
    for row in rows {
        let same = users
            .last()
            .is_some_and(|entry| entry.user.id == row.user.id);
        if !same {
            let groups = if row.user.status == crate::AccountStatus::Deleted {
                Vec::new()
            } else {
                vec![crate::EVERYONE_GROUP.to_string()]
            };
            users.push(crate::UserEntry {
                user: row.user,
                roles: crate::Roles::new(),
                groups,
            });
        }
        let Some(entry) = users.last_mut() else {
            continue;
        };
        if let Some(role) = row.granted {
            entry.roles.insert(role);
        }
        if let Some(group) = row.group_name {
            if !entry.groups.contains(&group) {
                entry.groups.push(group);
            }
        }
    }
    for entry in &mut users {
        entry.groups.sort();
    }
    users
}

/// The user methods of [`crate::Store`]; expanded inside each backend's
/// `impl`.
macro_rules! user_queries {
    () => {
        pub(crate) async fn create_first_user(&self, user: &NewUser) -> Result<User, StoreError> {
            let id = new_id();
            let mut tx = self
                .pool
                .begin_with(BEGIN_WRITE)
                .await
                .map_err(StoreError::Database)?;
            // "No user yet" must still hold when the row is written: backends whose
            // writers do not serialise lock the table first.
            if let Some(lock) = FIRST_USER_LOCK {
                sqlx::query(lock)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::Database)?;
            }
            let result = sqlx::query(&sql(
                "INSERT INTO users (id, username, email, role, password_hash, created_at) \
             SELECT ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM users WHERE system = FALSE)",
            ))
            .bind(&id)
            .bind(&user.username)
            .bind(&user.email)
            .bind(user.roles.legacy_role())
            .bind(&user.password_hash)
            .bind(self.now_ms())
            .execute(&mut *tx)
            .await
            .map_err(db_error("first user"))?;
            if result.rows_affected() == 0 {
                return Err(StoreError::Conflict("first user"));
            }
            Self::insert_roles(&mut tx, &id, &user.roles).await?;
            tx.commit().await.map_err(StoreError::Database)?;
            self.user_by_id(&id).await
        }

        /// The user and their roles, in one transaction: nobody ever sees a
        /// user without the roles they were created with.
        pub(crate) async fn create_user(&self, user: &NewUser) -> Result<User, StoreError> {
            let id = new_id();
            let mut tx = self
                .pool
                .begin_with(BEGIN_WRITE)
                .await
                .map_err(StoreError::Database)?;
            sqlx::query(&sql(
                "INSERT INTO users (id, username, email, role, password_hash, created_at) \
             VALUES (?, ?, ?, ?, ?, ?)",
            ))
            .bind(&id)
            .bind(&user.username)
            .bind(&user.email)
            .bind(user.roles.legacy_role())
            .bind(&user.password_hash)
            .bind(self.now_ms())
            .execute(&mut *tx)
            .await
            .map_err(db_error("username"))?;
            Self::insert_roles(&mut tx, &id, &user.roles).await?;
            tx.commit().await.map_err(StoreError::Database)?;
            self.user_by_id(&id).await
        }

        pub(crate) async fn user_by_name(&self, username: &str) -> Result<User, StoreError> {
            sqlx::query_as(&sql(&format!(
                "SELECT {USER_COLUMNS} FROM users WHERE username = ?"
            )))
            .bind(username)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("user"))
        }

        pub(crate) async fn set_password(
            &self,
            user_id: &str,
            password_hash: &str,
            now: i64,
            keep_session: Option<&str>,
        ) -> Result<u64, StoreError> {
            let mut tx = self
                .pool
                .begin_with(BEGIN_WRITE)
                .await
                .map_err(StoreError::Database)?;
            let changed = sqlx::query(&sql(
                "UPDATE users SET password_hash = ? WHERE id = ? AND system = FALSE",
            ))
            .bind(password_hash)
            .bind(user_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("user"))?;
            if changed.rows_affected() == 0 {
                return Err(StoreError::NotFound("user"));
            }
            // A new password ends every session the old one opened (a
            // stolen one included); named API tokens are their own grants.
            let ended = sqlx::query(&sql(
                "UPDATE api_tokens SET revoked_at = ? \
                 WHERE user_id = ? AND kind = 'session' AND revoked_at IS NULL AND id <> ?",
            ))
            .bind(now)
            .bind(user_id)
            .bind(keep_session.unwrap_or(""))
            .execute(&mut *tx)
            .await
            .map_err(db_error("token"))?;
            tx.commit().await.map_err(StoreError::Database)?;
            Ok(ended.rows_affected())
        }

        pub(crate) async fn user_by_id(&self, id: &str) -> Result<User, StoreError> {
            sqlx::query_as(&sql(&format!(
                "SELECT {USER_COLUMNS} FROM users WHERE id = ?"
            )))
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("user"))
        }

        pub(crate) async fn create_token(
            &self,
            user_id: &str,
            token_hash: &str,
        ) -> Result<(), StoreError> {
            sqlx::query(&sql(
                "INSERT INTO api_tokens (id, user_id, token_hash, created_at) VALUES (?, ?, ?, ?)",
            ))
            .bind(new_id())
            .bind(user_id)
            .bind(token_hash)
            .bind(self.now_ms())
            .execute(&self.pool)
            .await
            .map_err(db_error("token"))?;
            Ok(())
        }

        // ---- the system's reserved accounts ----

        pub(crate) async fn ensure_system_users(
            &self,
        ) -> Result<Vec<(String, String)>, StoreError> {
            let now = self.now_ms();
            let mut renamed = Vec::new();
            let mut tx = self
                .pool
                .begin_with(BEGIN_WRITE)
                .await
                .map_err(StoreError::Database)?;
            for actor in SystemActor::ALL {
                let name = actor.username();
                // A person who took the name before it was reserved keeps
                // their account under the first free `<name>-user[-N]`.
                let holder: Option<(String, bool)> = sqlx::query_as(&sql(
                    "SELECT id, system FROM users WHERE username = ?",
                ))
                .bind(name)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error("user"))?;
                if let Some((id, false)) = holder {
                    let mut n = 0;
                    let new_name = loop {
                        let candidate = match n {
                            0 => format!("{name}-user"),
                            n => format!("{name}-user-{n}"),
                        };
                        let taken: Option<(String,)> = sqlx::query_as(&sql(
                            "SELECT id FROM users WHERE username = ?",
                        ))
                        .bind(&candidate)
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(db_error("user"))?;
                        if taken.is_none() {
                            break candidate;
                        }
                        n += 1;
                    };
                    sqlx::query(&sql("UPDATE users SET username = ? WHERE id = ?"))
                        .bind(&new_name)
                        .bind(&id)
                        .execute(&mut *tx)
                        .await
                        .map_err(db_error("username"))?;
                    renamed.push((name.to_string(), new_name));
                }
                sqlx::query(&sql(
                    "INSERT INTO users (id, username, email, role, password_hash, created_at, system) \
                     VALUES (?, ?, ?, 'member', '', ?, TRUE) ON CONFLICT (id) DO NOTHING",
                ))
                .bind(actor.user_id())
                .bind(name)
                .bind(format!("{name}@system.invalid"))
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(db_error("username"))?;
            }
            tx.commit().await.map_err(StoreError::Database)?;
            Ok(renamed)
        }

        // ---- the user page ----

        pub(crate) async fn list_user_page(
            &self,
            after: Option<&str>,
            limit: i64,
            include_deleted: bool,
        ) -> Result<Page<UserEntry>, StoreError> {
            let after = after
                .map(|cursor| decode_cursor(USER_CURSOR, cursor, 1))
                .transpose()?;
            let after = after.as_ref().map(|key| key[0].as_str());
            // The page's users first, then their roles and groups joined:
            // one row per role and group (or one without), folded back per
            // user.
            let rows: Vec<UserRoleRow> = sqlx::query_as(&sql(&format!(
                "SELECT page.*, r.role AS granted, g.name AS group_name FROM \
             (SELECT {USER_COLUMNS} FROM users \
             WHERE system = FALSE AND (?1 IS NULL OR username > ?1) \
             AND (?3 OR status <> 'deleted') \
             ORDER BY username LIMIT ?2) page \
             LEFT JOIN user_roles r ON r.user_id = page.id \
             LEFT JOIN group_members m ON m.user_id = page.id \
             LEFT JOIN groups g ON g.id = m.group_id \
             ORDER BY page.username"
            )))
            .bind(after)
            .bind(limit + 1)
            .bind(include_deleted)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("user"))?;
            Ok(paged(user_entries(rows), limit, |entry| {
                encode_cursor(USER_CURSOR, &[&entry.user.username])
            }))
        }
    };
}

pub(crate) use user_queries;
