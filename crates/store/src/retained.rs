//! Retained resources (issue 32): what an intentional workspace delete
//! forgot instead of destroying, kept as a record the platform still owns
//! until someone adopts it into a workspace or destroys it.
//!
//! A record is written `pending` when the delete's plan is judged, before
//! anything is applied, and settled when the delete ends: `open` when the
//! workspace's state no longer holds the resource, `void` when it still
//! does. So a resource is always in a state or in a record, whatever
//! moment the server dies at; in both for a while, never in neither.

/// Where a retained resource is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetainedStatus {
    /// Its delete has not ended.
    Pending,
    Open,
    Adopted,
    Destroyed,
    /// Its delete ended with the resource still in the workspace's state.
    Void,
}

/// A stored status none of [`RetainedStatus`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown retained resource status `{0}`")]
pub struct UnknownRetainedStatus(pub String);

crate::named!(RetainedStatus, UnknownRetainedStatus, {
    Pending => "pending",
    Open => "open",
    Adopted => "adopted",
    Destroyed => "destroyed",
    Void => "void",
});

impl RetainedStatus {
    /// Whether the platform still holds the resource for someone.
    pub fn is_held(self) -> bool {
        matches!(self, RetainedStatus::Pending | RetainedStatus::Open)
    }
}

from_row! {
    /// A retained resource.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct RetainedResource {
        pub id: String,
        pub status: RetainedStatus,
        pub address: String,
        pub resource_type: String,
        pub provider: String,
        /// What its provider imports it by (`abode_volume`: its name).
        pub import_id: String,
        /// Its attributes as the delete's plan showed them, sensitive values
        /// hidden (a JSON object).
        pub attributes: String,
        pub workspace_id: String,
        pub workspace_name: String,
        pub owner_id: String,
        pub owner_name: String,
        pub template_name: String,
        pub template_version: i64,
        /// The delete that retained it.
        pub build_id: String,
        /// Who asked for that delete.
        pub retained_by: String,
        pub created_at: i64,
        pub expires_at: Option<i64>,
        /// `hold` or `destroy`: what its expiry does.
        pub expire_action: String,
        /// `OWNER_ID/WORKSPACE` a create with `--adopt` reserved it for.
        pub adopt_for: Option<String>,
        pub closed_at: Option<i64>,
        pub closed_by: Option<String>,
        pub closed_build_id: Option<String>,
        /// The build destroying it, if one was queued.
        pub destroy_build_id: Option<String>,
        /// `resource` (what a delete retained) or `snapshot` (an archive of a
        /// volume taken before a confirmed destroy, issue 47).
        pub kind: String,
        /// A snapshot's archive: its file name in the server's snapshots dir.
        pub archive: Option<String>,
        pub archive_bytes: Option<i64>,
    }
}

/// The kind of a record that is an archive taken before a confirmed destroy.
pub const SNAPSHOT_KIND: &str = "snapshot";

impl RetainedResource {
    /// Whether it is an archive of a volume's files, not a resource.
    pub fn is_snapshot(&self) -> bool {
        self.kind == SNAPSHOT_KIND
    }
}

/// A snapshot's record, written once its archive is whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSnapshot {
    pub id: String,
    pub address: String,
    pub resource_type: String,
    pub provider: String,
    pub import_id: String,
    pub attributes: String,
    pub expires_at: Option<i64>,
    pub expire_action: String,
    pub archive: String,
    pub archive_bytes: i64,
}

/// A record written when a delete's plan is judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRetained {
    pub address: String,
    pub resource_type: String,
    pub provider: String,
    pub import_id: String,
    pub attributes: String,
    pub expires_at: Option<i64>,
    pub expire_action: String,
    /// The resource's object in the state before the delete (JSON).
    pub state_fragment: Option<String>,
}

use crate::error::{BadCursor, StoreError};
use crate::pages::{decode_cursor, RETAINED_CURSOR};

pub(crate) const RETAINED_SELECT: &str = "SELECT r.id, r.status, r.address, r.resource_type, \
     r.provider, r.import_id, r.attributes, r.workspace_id, r.workspace_name, r.owner_id, \
     o.username AS owner_name, r.template_name, r.template_version, r.build_id, r.retained_by, \
     r.created_at, r.expires_at, r.expire_action, r.adopt_for, r.closed_at, r.closed_by, \
     r.closed_build_id, r.destroy_build_id, r.kind, r.archive, r.archive_bytes \
     FROM retained_resources r \
     JOIN users o ON o.id = r.owner_id";

/// A retained list's cursor: the time it is ordered by and the id.
pub(crate) fn retained_cursor(
    after: Option<&str>,
) -> Result<(Option<i64>, Option<String>), StoreError> {
    let Some(cursor) = after else {
        return Ok((None, None));
    };
    let mut key = decode_cursor(RETAINED_CURSOR, cursor, 2)?;
    let at = key[0]
        .parse::<i64>()
        .map_err(|_| StoreError::BadCursor(BadCursor))?;
    Ok((Some(at), key.pop()))
}

/// The retained resource methods of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! retained_queries {
    () => {
    pub(crate) async fn build_retention(
        &self,
        build_id: &str,
    ) -> Result<Option<DeleteRetention>, StoreError> {
        let row: Option<(Option<DeleteRetention>,)> =
            sqlx::query_as(&sql("SELECT retention FROM builds WHERE id = ?"))
                .bind(build_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(db_error("build"))?;
        match row {
            Some((retention,)) => Ok(retention),
            None => Err(StoreError::NotFound("build")),
        }
    }

    pub(crate) async fn insert_retained(
        &self,
        build_id: &str,
        retained_by: &str,
        records: &[NewRetained],
    ) -> Result<(), StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        for record in records {
            sqlx::query(&sql(
                "INSERT INTO retained_resources (id, status, address, resource_type, provider, \
                 import_id, attributes, workspace_id, workspace_name, owner_id, template_name, \
                 template_version, build_id, retained_by, created_at, expires_at, expire_action, \
                 state_fragment) \
                 SELECT ?, 'pending', ?, ?, ?, ?, ?, w.id, w.name, w.owner_id, t.name, v.number, \
                 b.id, ?, ?, ?, ?, ? FROM builds b JOIN workspaces w ON w.id = b.workspace_id \
                 JOIN templates t ON t.id = w.template_id \
                 JOIN template_versions v ON v.id = b.template_version_id WHERE b.id = ? \
                 ON CONFLICT (build_id, address) DO NOTHING",
            ))
            .bind(crate::ids::new_id())
            .bind(&record.address)
            .bind(&record.resource_type)
            .bind(&record.provider)
            .bind(&record.import_id)
            .bind(&record.attributes)
            .bind(retained_by)
            .bind(now)
            .bind(record.expires_at)
            .bind(&record.expire_action)
            .bind(&record.state_fragment)
            .bind(build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("retained resource"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(())
    }

    pub(crate) async fn insert_snapshot(
        &self,
        build_id: &str,
        retained_by: &str,
        record: &NewSnapshot,
    ) -> Result<RetainedResource, StoreError> {
        let now = self.now_ms();
        let inserted = sqlx::query(&sql(
            "INSERT INTO retained_resources (id, status, address, resource_type, provider, \
             import_id, attributes, workspace_id, workspace_name, owner_id, template_name, \
             template_version, build_id, retained_by, created_at, expires_at, expire_action, \
             kind, archive, archive_bytes) \
             SELECT ?, 'open', ?, ?, ?, ?, ?, w.id, w.name, w.owner_id, t.name, v.number, \
             b.id, ?, ?, ?, ?, 'snapshot', ?, ? FROM builds b \
             JOIN workspaces w ON w.id = b.workspace_id \
             JOIN templates t ON t.id = w.template_id \
             JOIN template_versions v ON v.id = b.template_version_id WHERE b.id = ?",
        ))
        .bind(&record.id)
        .bind(&record.address)
        .bind(&record.resource_type)
        .bind(&record.provider)
        .bind(&record.import_id)
        .bind(&record.attributes)
        .bind(retained_by)
        .bind(now)
        .bind(record.expires_at)
        .bind(&record.expire_action)
        .bind(&record.archive)
        .bind(record.archive_bytes)
        .bind(build_id)
        .execute(&self.pool)
        .await
        .map_err(db_error("retained resource"))?;
        if inserted.rows_affected() == 0 {
            return Err(StoreError::NotFound("build"));
        }
        self.retained_by_id(&record.id).await
    }

    pub(crate) async fn settle_retained(
        &self,
        build_id: &str,
        still_in_state: &[String],
    ) -> Result<Vec<RetainedResource>, StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let pending: Vec<(String, String)> = sqlx::query_as(&sql(
            "SELECT id, address FROM retained_resources WHERE build_id = ? AND status = 'pending'",
        ))
        .bind(build_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error("retained resource"))?;
        for (id, address) in &pending {
            let void = still_in_state.contains(address);
            sqlx::query(&sql(
                "UPDATE retained_resources SET status = ?, closed_at = ? WHERE id = ?",
            ))
            .bind(if void { "void" } else { "open" })
            .bind(if void { Some(now) } else { None })
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("retained resource"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        let ids: Vec<&String> = pending.iter().map(|(id, _)| id).collect();
        let mut settled = Vec::new();
        for id in ids {
            settled.push(self.retained_by_id(id).await?);
        }
        Ok(settled)
    }

    pub(crate) async fn retained_by_id(&self, id: &str) -> Result<RetainedResource, StoreError> {
        sqlx::query_as(&sql(&format!("{RETAINED_SELECT} WHERE r.id = ?")))
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("retained resource"))?
            .ok_or(StoreError::NotFound("retained resource"))
    }

    pub(crate) async fn list_retained_page(
        &self,
        owner_id: Option<&str>,
        include_closed: bool,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Page<RetainedResource>, StoreError> {
        let (after_at, after_id) = retained_cursor(after)?;
        let after_id = after_id.as_deref();
        let rows: Vec<RetainedResource> = sqlx::query_as(&sql(&format!(
            "{RETAINED_SELECT} WHERE (?1 IS NULL OR r.owner_id = ?1) \
             AND (?2 OR r.status IN ('pending', 'open')) \
             AND (?3 IS NULL OR r.created_at > ?3 OR (r.created_at = ?3 AND r.id > ?4)) \
             ORDER BY r.created_at, r.id LIMIT ?5"
        )))
        .bind(owner_id)
        .bind(include_closed)
        .bind(after_at)
        .bind(after_id)
        .bind(limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("retained resource"))?;
        Ok(paged(rows, limit, |r| {
            encode_cursor(RETAINED_CURSOR, &[&r.created_at.to_string(), &r.id])
        }))
    }

    pub(crate) async fn assign_retained(
        &self,
        id: &str,
        owner_id: &str,
    ) -> Result<RetainedResource, StoreError> {
        let changed = sqlx::query(&sql(
            "UPDATE retained_resources SET owner_id = ?, adopt_for = NULL \
             WHERE id = ? AND status = 'open'",
        ))
        .bind(owner_id)
        .bind(id)
        .execute(&self.pool)
        .await
        .map_err(db_error("retained resource"))?;
        if changed.rows_affected() == 0 {
            return Err(StoreError::NotFound("open retained resource"));
        }
        self.retained_by_id(id).await
    }

    pub(crate) async fn extend_retained(
        &self,
        id: &str,
        expires_at: i64,
    ) -> Result<RetainedResource, StoreError> {
        // A new expiry may be acted on again (a destroy it queued ended).
        let changed = sqlx::query(&sql(
            "UPDATE retained_resources SET expires_at = ?, destroy_build_id = NULL \
             WHERE id = ? AND status = 'open' AND (destroy_build_id IS NULL OR destroy_build_id IN \
             (SELECT id FROM builds WHERE status IN ('succeeded', 'failed', 'canceled')))",
        ))
        .bind(expires_at)
        .bind(id)
        .execute(&self.pool)
        .await
        .map_err(db_error("retained resource"))?;
        if changed.rows_affected() == 0 {
            return Err(StoreError::NotFound("open retained resource"));
        }
        self.retained_by_id(id).await
    }

    pub(crate) async fn reserve_retained_for(
        &self,
        ids: &[String],
        owner_id: &str,
        adopt_for: &str,
    ) -> Result<Vec<RetainedResource>, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        for id in ids {
            let changed = sqlx::query(&sql(
                "UPDATE retained_resources SET adopt_for = ? \
                 WHERE id = ? AND owner_id = ? AND status = 'open'",
            ))
            .bind(adopt_for)
            .bind(id)
            .bind(owner_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("retained resource"))?;
            if changed.rows_affected() == 0 {
                return Err(StoreError::NotFound("open retained resource"));
            }
        }
        tx.commit().await.map_err(StoreError::Database)?;
        let mut reserved = Vec::new();
        for id in ids {
            reserved.push(self.retained_by_id(id).await?);
        }
        Ok(reserved)
    }

    pub(crate) async fn release_adoption(&self, adopt_for: &str) -> Result<u64, StoreError> {
        let released = sqlx::query(&sql(
            "UPDATE retained_resources SET adopt_for = NULL WHERE adopt_for = ?",
        ))
        .bind(adopt_for)
        .execute(&self.pool)
        .await
        .map_err(db_error("retained resource"))?;
        Ok(released.rows_affected())
    }

    pub(crate) async fn retained_to_adopt(
        &self,
        adopt_for: &str,
    ) -> Result<Vec<RetainedResource>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{RETAINED_SELECT} WHERE r.adopt_for = ? AND r.status = 'open' ORDER BY r.address"
        )))
        .bind(adopt_for)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("retained resource"))
    }

    pub(crate) async fn create_retained_destroy_build(
        &self,
        record_id: &str,
        build: &NewBuild,
        state: &[u8],
    ) -> Result<Build, StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let held: Option<(Option<String>,)> = sqlx::query_as(&sql(
            "SELECT destroy_build_id FROM retained_resources WHERE id = ? AND status = 'open'",
        ))
        .bind(record_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error("retained resource"))?;
        let Some((destroying,)) = held else {
            return Err(StoreError::NotFound("open retained resource"));
        };
        if let Some(destroying) = destroying {
            let status: Option<(BuildStatus,)> =
                sqlx::query_as(&sql("SELECT status FROM builds WHERE id = ?"))
                    .bind(&destroying)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_error("build"))?;
            if status.is_some_and(|(status,)| !status.is_final()) {
                return Err(StoreError::Conflict("retained resource destroy"));
            }
        }
        let active: Option<(String,)> = sqlx::query_as(&sql(
            "SELECT id FROM builds WHERE workspace_id = ? \
             AND status IN ('pending', 'running', 'awaiting_confirmation')",
        ))
        .bind(&build.workspace_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        if active.is_some() {
            return Err(StoreError::Conflict("active build"));
        }
        Self::insert_next_build(&mut tx, build, now).await?;
        sqlx::query(&sql(
            "INSERT INTO workspace_states (workspace_id, build_id, state, updated_at) \
             VALUES (?, ?, ?, ?) ON CONFLICT (workspace_id) DO UPDATE SET \
             build_id = excluded.build_id, state = excluded.state, updated_at = excluded.updated_at",
        ))
        .bind(&build.workspace_id)
        .bind(&build.id)
        .bind(state)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error("state"))?;
        sqlx::query(&sql(
            "UPDATE retained_resources SET destroy_build_id = ? WHERE id = ?",
        ))
        .bind(&build.id)
        .bind(record_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("retained resource"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        self.build_by_id(&build.id).await
    }

    pub(crate) async fn retained_destroyed_by(
        &self,
        build_id: &str,
    ) -> Result<Option<RetainedResource>, StoreError> {
        sqlx::query_as(&sql(&format!("{RETAINED_SELECT} WHERE r.destroy_build_id = ?")))
            .bind(build_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("retained resource"))
    }

    pub(crate) async fn retained_state_fragment(
        &self,
        id: &str,
    ) -> Result<Option<String>, StoreError> {
        let row: Option<(Option<String>,)> = sqlx::query_as(&sql(
            "SELECT state_fragment FROM retained_resources WHERE id = ?",
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error("retained resource"))?;
        Ok(row.and_then(|(fragment,)| fragment))
    }

    pub(crate) async fn retained_expiring(
        &self,
        before: i64,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Page<RetainedResource>, StoreError> {
        let (after_at, after_id) = retained_cursor(after)?;
        let after_id = after_id.as_deref();
        let rows: Vec<RetainedResource> = sqlx::query_as(&sql(&format!(
            "{RETAINED_SELECT} WHERE r.status = 'open' AND r.expires_at IS NOT NULL \
             AND r.expires_at <= ?1 \
             AND (?2 IS NULL OR r.expires_at > ?2 OR (r.expires_at = ?2 AND r.id > ?3)) \
             ORDER BY r.expires_at, r.id LIMIT ?4"
        )))
        .bind(before)
        .bind(after_at)
        .bind(after_id)
        .bind(limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("retained resource"))?;
        Ok(paged(rows, limit, |r| {
            encode_cursor(
                RETAINED_CURSOR,
                &[&r.expires_at.unwrap_or_default().to_string(), &r.id],
            )
        }))
    }

    pub(crate) async fn state_page(
        &self,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        sqlx::query_as(&sql(
            "SELECT workspace_id, state FROM workspace_states \
             WHERE (?1 IS NULL OR workspace_id > ?1) ORDER BY workspace_id LIMIT ?2",
        ))
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("state"))
    }

    pub(crate) async fn close_retained(
        &self,
        id: &str,
        status: RetainedStatus,
        closed_by: &str,
        build_id: Option<&str>,
    ) -> Result<bool, StoreError> {
        let now = self.now_ms();
        let changed = sqlx::query(&sql(
            "UPDATE retained_resources SET status = ?, closed_at = ?, closed_by = ?, \
             closed_build_id = ? WHERE id = ? AND status = 'open'",
        ))
        .bind(status.as_str())
        .bind(now)
        .bind(closed_by)
        .bind(build_id)
        .bind(id)
        .execute(&self.pool)
        .await
        .map_err(db_error("retained resource"))?;
        Ok(changed.rows_affected() > 0)
    }
    };
}

pub(crate) use retained_queries;
