//! Provisioner keys: the credentials external provisioner daemons
//! authenticate with. Like API tokens, a key is found by its SHA-256, which
//! is all the database keeps; unlike them it belongs to no user (an owner
//! makes it for a daemon) and carries the tags its daemon offers. A deleted
//! key's row is gone, so its secret finds nothing.

from_row! {
    /// A provisioner key as listed, without its hash. Times are Unix ms.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ProvisionerKeyRow {
        pub id: String,
        pub name: String,
        /// A JSON object of tags.
        pub tags: String,
        pub created_at: i64,
        /// The id of the user who made it.
        pub created_by: String,
        /// Their username, joined in.
        pub created_by_name: String,
    }
}

/// A new provisioner key.
#[derive(Debug, Clone)]
pub struct NewProvisionerKey {
    pub name: String,
    /// SHA-256 of the key, hex.
    pub secret_hash: String,
    /// A JSON object of tags.
    pub tags: String,
    pub created_by: String,
}

pub(crate) const PROVISIONER_KEY_CURSOR: &str = "provisioner-keys";

/// The columns of [`ProvisionerKeyRow`], from `provisioner_keys k` joined
/// with its creator `users u`.
pub(crate) const PROVISIONER_KEY_SELECT: &str =
    "SELECT k.id, k.name, k.tags, k.created_at, k.created_by, u.username AS created_by_name \
     FROM provisioner_keys k JOIN users u ON u.id = k.created_by";

/// The provisioner key methods of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! provisioner_key_queries {
    () => {
    pub(crate) async fn create_provisioner_key(
        &self,
        key: &NewProvisionerKey,
    ) -> Result<ProvisionerKeyRow, StoreError> {
        let id = new_id();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        // A unique violation is the name's: the hash of 32 random bytes
        // does not repeat.
        sqlx::query(&sql(
            "INSERT INTO provisioner_keys (id, name, secret_hash, tags, created_at, created_by) \
             VALUES (?, ?, ?, ?, ?, ?)",
        ))
        .bind(&id)
        .bind(&key.name)
        .bind(&key.secret_hash)
        .bind(&key.tags)
        .bind(self.now_ms())
        .bind(&key.created_by)
        .execute(&mut *tx)
        .await
        .map_err(db_error("provisioner key name"))?;
        let row = sqlx::query_as(&sql(&format!("{PROVISIONER_KEY_SELECT} WHERE k.id = ?")))
            .bind(&id)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error("provisioner key"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(row)
    }

    pub(crate) async fn list_provisioner_key_page(
        &self,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Page<ProvisionerKeyRow>, StoreError> {
        let after = after
            .map(|cursor| decode_cursor(PROVISIONER_KEY_CURSOR, cursor, 1))
            .transpose()?;
        let after = after.as_ref().map(|key| key[0].as_str());
        let rows: Vec<ProvisionerKeyRow> = sqlx::query_as(&sql(&format!(
            "{PROVISIONER_KEY_SELECT} WHERE (?1 IS NULL OR k.name > ?1) ORDER BY k.name LIMIT ?2"
        )))
        .bind(after)
        .bind(limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("provisioner key"))?;
        Ok(paged(rows, limit, |key| {
            encode_cursor(PROVISIONER_KEY_CURSOR, &[&key.name])
        }))
    }

    pub(crate) async fn delete_provisioner_key(
        &self,
        name: &str,
    ) -> Result<ProvisionerKeyRow, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let row: ProvisionerKeyRow =
            sqlx::query_as(&sql(&format!("{PROVISIONER_KEY_SELECT} WHERE k.name = ?")))
                .bind(name)
                .fetch_one(&mut *tx)
                .await
                .map_err(db_error("provisioner key"))?;
        sqlx::query(&sql("DELETE FROM provisioner_keys WHERE id = ?"))
            .bind(&row.id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("provisioner key"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(row)
    }

    pub(crate) async fn provisioner_key_by_hash(
        &self,
        secret_hash: &str,
    ) -> Result<ProvisionerKeyRow, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{PROVISIONER_KEY_SELECT} WHERE k.secret_hash = ?"
        )))
        .bind(secret_hash)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("provisioner key"))
    }
    };
}

pub(crate) use provisioner_key_queries;
