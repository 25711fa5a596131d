//! External auth (docs/external-auth.md): the accounts people linked, with
//! their tokens as the server sealed them (the store never sees a token in
//! the clear), and the links under way.

from_row! {
    /// A person's linked account.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ExternalAuthLink {
        pub user_id: String,
        pub provider_id: String,
        /// Sealed (`abode_external_auth::cipher`).
        pub access_token: String,
        /// Sealed, when the provider gave one.
        pub refresh_token: Option<String>,
        /// When the access token expires (ms), when the provider said.
        pub expires_at: Option<i64>,
        /// The key that sealed both.
        pub key_id: String,
        pub linked_at: i64,
        pub refreshed_at: i64,
    }
}

from_row! {
    /// A link under way, taken back by the provider's redirect.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PendingExternalAuth {
        pub user_id: String,
        pub provider_id: String,
        /// The PKCE verifier, sealed.
        pub verifier: String,
    }
}

/// The external auth methods of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! external_auth_queries {
    () => {
    pub(crate) async fn put_external_auth_link(
        &self,
        link: &crate::external_auth::ExternalAuthLink,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql(
            "INSERT INTO external_auth_links (user_id, provider_id, access_token, refresh_token, \
             expires_at, key_id, linked_at, refreshed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
             ON CONFLICT (user_id, provider_id) DO UPDATE SET access_token = excluded.access_token, \
             refresh_token = excluded.refresh_token, expires_at = excluded.expires_at, \
             key_id = excluded.key_id, linked_at = excluded.linked_at, \
             refreshed_at = excluded.refreshed_at",
        ))
        .bind(&link.user_id)
        .bind(&link.provider_id)
        .bind(&link.access_token)
        .bind(&link.refresh_token)
        .bind(link.expires_at)
        .bind(&link.key_id)
        .bind(link.linked_at)
        .bind(link.refreshed_at)
        .execute(&self.pool)
        .await
        .map_err(db_error("external auth link"))?;
        Ok(())
    }

    pub(crate) async fn external_auth_links_of(
        &self,
        user_id: &str,
    ) -> Result<Vec<crate::external_auth::ExternalAuthLink>, StoreError> {
        sqlx::query_as(&sql(
            "SELECT user_id, provider_id, access_token, refresh_token, expires_at, key_id, \
             linked_at, refreshed_at FROM external_auth_links WHERE user_id = ? ORDER BY provider_id",
        ))
        .bind(user_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("external auth link"))
    }

    pub(crate) async fn delete_external_auth_link(
        &self,
        user_id: &str,
        provider_id: &str,
    ) -> Result<Option<crate::external_auth::ExternalAuthLink>, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let link: Option<crate::external_auth::ExternalAuthLink> = sqlx::query_as(&sql(
            "SELECT user_id, provider_id, access_token, refresh_token, expires_at, key_id, \
             linked_at, refreshed_at FROM external_auth_links WHERE user_id = ? AND provider_id = ?",
        ))
        .bind(user_id)
        .bind(provider_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error("external auth link"))?;
        sqlx::query(&sql(
            "DELETE FROM external_auth_links WHERE user_id = ? AND provider_id = ?",
        ))
        .bind(user_id)
        .bind(provider_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("external auth link"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(link)
    }

    pub(crate) async fn refresh_external_auth_link(
        &self,
        link: &crate::external_auth::ExternalAuthLink,
        previous_refreshed_at: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(&sql(
            "UPDATE external_auth_links SET access_token = ?, refresh_token = ?, expires_at = ?, \
             key_id = ?, refreshed_at = ? WHERE user_id = ? AND provider_id = ? AND linked_at = ? \
             AND refreshed_at = ?",
        ))
        .bind(&link.access_token)
        .bind(&link.refresh_token)
        .bind(link.expires_at)
        .bind(&link.key_id)
        .bind(link.refreshed_at)
        .bind(&link.user_id)
        .bind(&link.provider_id)
        .bind(link.linked_at)
        .bind(previous_refreshed_at)
        .execute(&self.pool)
        .await
        .map_err(db_error("external auth link"))?;
        Ok(done.rows_affected() > 0)
    }

    pub(crate) async fn external_auth_links_of_closed_accounts(
        &self,
    ) -> Result<Vec<crate::external_auth::ExternalAuthLink>, StoreError> {
        sqlx::query_as(&sql(
            "SELECT l.user_id, l.provider_id, l.access_token, l.refresh_token, l.expires_at, \
             l.key_id, l.linked_at, l.refreshed_at FROM external_auth_links l \
             JOIN users u ON u.id = l.user_id WHERE u.status IN ('suspended', 'deleted') \
             ORDER BY l.user_id, l.provider_id",
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("external auth link"))
    }

    pub(crate) async fn reseal_external_auth_links(
        &self,
        reseal: &(dyn Fn(
            &crate::external_auth::ExternalAuthLink,
        ) -> Result<crate::external_auth::ExternalAuthLink, String>
              + Send
              + Sync),
    ) -> Result<Result<u64, String>, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let links: Vec<crate::external_auth::ExternalAuthLink> = sqlx::query_as(&sql(
            "SELECT user_id, provider_id, access_token, refresh_token, expires_at, key_id, \
             linked_at, refreshed_at FROM external_auth_links ORDER BY user_id, provider_id",
        ))
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error("external auth link"))?;
        let mut count = 0;
        for link in &links {
            let resealed = match reseal(link) {
                Ok(resealed) => resealed,
                // Dropped unfinished: nothing is half re-encrypted.
                Err(refusal) => return Ok(Err(refusal)),
            };
            // Only the row as it was read: a refresh that slipped in (a
            // server left running) makes the rotation stop, unfinished.
            let done = sqlx::query(&sql(
                "UPDATE external_auth_links SET access_token = ?, refresh_token = ?, key_id = ? \
                 WHERE user_id = ? AND provider_id = ? AND access_token = ?",
            ))
            .bind(&resealed.access_token)
            .bind(&resealed.refresh_token)
            .bind(&resealed.key_id)
            .bind(&link.user_id)
            .bind(&link.provider_id)
            .bind(&link.access_token)
            .execute(&mut *tx)
            .await
            .map_err(db_error("external auth link"))?;
            if done.rows_affected() == 0 {
                return Ok(Err(format!(
                    "the {} link of user id {} changed during the rotation: stop every server and run it again",
                    link.provider_id, link.user_id
                )));
            }
            count += 1;
        }
        // A link under way holds a verifier sealed under the old key: it
        // is started again.
        sqlx::query(&sql("DELETE FROM external_auth_pending"))
            .execute(&mut *tx)
            .await
            .map_err(db_error("external auth link under way"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(Ok(count))
    }

    pub(crate) async fn create_external_auth_pending(
        &self,
        state_hash: &str,
        pending: &crate::external_auth::PendingExternalAuth,
        expires_at: i64,
    ) -> Result<(), StoreError> {
        // Expired links under way go as new ones come.
        sqlx::query(&sql("DELETE FROM external_auth_pending WHERE expires_at < ?"))
            .bind(self.now_ms())
            .execute(&self.pool)
            .await
            .map_err(db_error("external auth link under way"))?;
        sqlx::query(&sql(
            "INSERT INTO external_auth_pending (state_hash, user_id, provider_id, verifier, expires_at) \
             VALUES (?, ?, ?, ?, ?)",
        ))
        .bind(state_hash)
        .bind(&pending.user_id)
        .bind(&pending.provider_id)
        .bind(&pending.verifier)
        .bind(expires_at)
        .execute(&self.pool)
        .await
        .map_err(db_error("external auth link under way"))?;
        Ok(())
    }

    pub(crate) async fn take_external_auth_pending(
        &self,
        state_hash: &str,
    ) -> Result<Option<crate::external_auth::PendingExternalAuth>, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let pending: Option<crate::external_auth::PendingExternalAuth> = sqlx::query_as(&sql(
            "SELECT user_id, provider_id, verifier FROM external_auth_pending \
             WHERE state_hash = ? AND expires_at >= ?",
        ))
        .bind(state_hash)
        .bind(self.now_ms())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error("external auth link under way"))?;
        sqlx::query(&sql("DELETE FROM external_auth_pending WHERE state_hash = ?"))
            .bind(state_hash)
            .execute(&mut *tx)
            .await
            .map_err(db_error("external auth link under way"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(pending)
    }
    };
}
pub(crate) use external_auth_queries;
