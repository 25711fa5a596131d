//! The SSH host key of each workspace: created once, on the first SSH
//! connection, and kept for the workspace's life. The key is a secret: it
//! has its own getter and is never part of a general record.

/// The host key methods of [`crate::Store`]; expanded inside each backend's
/// `impl`.
macro_rules! host_key_queries {
    () => {
    pub(crate) async fn workspace_host_key(
        &self,
        workspace_id: &str,
        new_seed: &str,
    ) -> Result<String, StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        // The first connection's key wins; a concurrent first connection
        // reads it back instead of writing its own.
        sqlx::query(&sql(
            "INSERT INTO workspace_host_keys (workspace_id, seed, created_at) VALUES (?, ?, ?) \
             ON CONFLICT (workspace_id) DO NOTHING",
        ))
        .bind(workspace_id)
        .bind(new_seed)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error("workspace"))?;
        let seed: String = sqlx::query_scalar(&sql(
            "SELECT seed FROM workspace_host_keys WHERE workspace_id = ?",
        ))
        .bind(workspace_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error("workspace"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(seed)
    }
    };
}
pub(crate) use host_key_queries;
