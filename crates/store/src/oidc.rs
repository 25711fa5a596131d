//! OpenID Connect's rows: the link of an account to the provider's issuer
//! and subject (a person signed in by the provider is found by it, never by
//! email), and the pending sign-ins and one-time codes of the flow (taken
//! once: a `DELETE ... RETURNING`, so two takes of one key cannot both get
//! it). What the pending payloads mean is `abode-oidc`'s.

/// The most single sign-on entries (sign-ins started, CLI codes) kept
/// unexpired at once; beyond it a new sign-in is refused as busy.
pub const MAX_OIDC_PENDING: i64 = 10_000;

/// The OpenID Connect methods of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! oidc_queries {
    () => {
        pub(crate) async fn user_by_oidc_subject(
            &self,
            issuer: &str,
            subject: &str,
        ) -> Result<User, StoreError> {
            sqlx::query_as(&sql(&format!(
                "SELECT {} FROM users WHERE id = \
                 (SELECT user_id FROM user_oidc_links WHERE issuer = ? AND subject = ?)",
                crate::users::USER_COLUMNS
            )))
            .bind(issuer)
            .bind(subject)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("user"))
        }

        pub(crate) async fn create_oidc_user(
            &self,
            user: &NewUser,
            issuer: &str,
            subject: &str,
        ) -> Result<User, StoreError> {
            let id = new_id();
            let now = self.now_ms();
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
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_error("username"))?;
            Self::insert_roles(&mut tx, &id, &user.roles).await?;
            sqlx::query(&sql(
                "INSERT INTO user_oidc_links (issuer, subject, user_id, created_at) \
                 VALUES (?, ?, ?, ?)",
            ))
            .bind(issuer)
            .bind(subject)
            .bind(&id)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_error("oidc link"))?;
            tx.commit().await.map_err(StoreError::Database)?;
            self.user_by_id(&id).await
        }

        pub(crate) async fn set_user_email(
            &self,
            user_id: &str,
            email: &str,
        ) -> Result<(), StoreError> {
            let changed = sqlx::query(&sql("UPDATE users SET email = ? WHERE id = ?"))
                .bind(email)
                .bind(user_id)
                .execute(&self.pool)
                .await
                .map_err(db_error("user"))?;
            if changed.rows_affected() == 0 {
                return Err(StoreError::NotFound("user"));
            }
            Ok(())
        }

        pub(crate) async fn end_user_tokens(
            &self,
            user_id: &str,
            now: i64,
        ) -> Result<u64, StoreError> {
            let ended = sqlx::query(&sql(
                "UPDATE api_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL",
            ))
            .bind(now)
            .bind(user_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("token"))?;
            Ok(ended.rows_affected())
        }

        pub(crate) async fn put_oidc_pending(
            &self,
            key_hash: &str,
            payload: &str,
            expires_at: i64,
            now: i64,
        ) -> Result<(), StoreError> {
            let mut tx = self
                .pool
                .begin_with(BEGIN_WRITE)
                .await
                .map_err(StoreError::Database)?;
            // What nobody came back for goes with the next sign-in.
            sqlx::query(&sql("DELETE FROM oidc_pending WHERE expires_at <= ?"))
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(db_error("oidc pending"))?;
            // Anyone may start a sign-in: the entries under way are capped.
            let under_way: i64 = sqlx::query_scalar(&sql("SELECT COUNT(*) FROM oidc_pending"))
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error("oidc pending"))?;
            if under_way >= crate::oidc::MAX_OIDC_PENDING {
                return Err(StoreError::Conflict("sign-ins under way"));
            }
            sqlx::query(&sql(
                "INSERT INTO oidc_pending (key_hash, payload, expires_at) VALUES (?, ?, ?)",
            ))
            .bind(key_hash)
            .bind(payload)
            .bind(expires_at)
            .execute(&mut *tx)
            .await
            .map_err(db_error("oidc pending"))?;
            tx.commit().await.map_err(StoreError::Database)
        }

        pub(crate) async fn take_oidc_pending(
            &self,
            key_hash: &str,
            now: i64,
        ) -> Result<Option<String>, StoreError> {
            let rows: Vec<(String, i64)> = sqlx::query_as(&sql(
                "DELETE FROM oidc_pending WHERE key_hash = ? RETURNING payload, expires_at",
            ))
            .bind(key_hash)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("oidc pending"))?;
            Ok(rows
                .into_iter()
                .next()
                .filter(|(_, expires_at)| *expires_at > now)
                .map(|(payload, _)| payload))
        }
    };
}
pub(crate) use oidc_queries;
