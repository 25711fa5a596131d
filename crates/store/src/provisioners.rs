//! The provisioners of every server on the database, as their heartbeats
//! last told: what `abode provisioner list` shows an operator running
//! several servers. Each row names the job its worker holds now (a build's
//! job, or a preview's plan), read in the same query.

use crate::records::Transition;

/// Where a provisioner runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProvisionerKind {
    /// A worker inside `abode server`.
    Embedded,
    /// A slot of an `abode provisioner start` daemon.
    External,
}

/// A stored provisioner kind none of [`ProvisionerKind`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provisioner kind `{0}`")]
pub struct UnknownProvisionerKind(pub String);

crate::named!(ProvisionerKind, UnknownProvisionerKind, {
    Embedded => "embedded",
    External => "external",
});

from_row! {
    /// A provisioner as listed.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ProvisionerRow {
        pub server_id: String,
        pub name: String,
        /// The host it runs on (its server's id, or its daemon's); empty for a
        /// row an older server wrote.
        pub host: String,
        pub kind: ProvisionerKind,
        /// A JSON object of tags.
        pub tags: String,
        pub version: String,
        pub started_at: i64,
        pub last_beat_at: i64,
        /// The build it runs now, if any.
        pub build_number: Option<i64>,
        pub build_transition: Option<Transition>,
        /// `owner/name` of the workspace of the build, or of the preview it plans.
        pub build_workspace: Option<String>,
        pub preview_workspace: Option<String>,
    }
}

/// Who tells that provisioners are alive: a server for its workers, or a
/// daemon for one of its slots.
#[derive(Debug, Clone, Copy)]
pub struct ProvisionerBeat<'a> {
    /// The server's id, or the daemon's lease holder.
    pub server_id: &'a str,
    /// The host they run on (the server's id, the daemon's).
    pub host: &'a str,
    pub kind: ProvisionerKind,
    /// A JSON object of the tags they offer.
    pub tags: &'a str,
    pub version: &'a str,
}

pub(crate) const PROVISIONER_CURSOR: &str = "provisioners";

/// The provisioner methods of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! provisioner_queries {
    () => {
    pub(crate) async fn beat_provisioners(
        &self,
        beat: &ProvisionerBeat<'_>,
        names: &[String],
        forget_before: i64,
    ) -> Result<(), StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        for name in names {
            sqlx::query(&sql(
                "INSERT INTO provisioners (server_id, name, host, kind, tags, version, started_at, last_beat_at) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (server_id, name) DO UPDATE SET version = excluded.version, \
                 host = excluded.host, tags = excluded.tags, last_beat_at = excluded.last_beat_at",
            ))
            .bind(beat.server_id)
            .bind(name)
            .bind(beat.host)
            .bind(beat.kind.as_str())
            .bind(beat.tags)
            .bind(beat.version)
            .bind(now)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_error("provisioner"))?;
        }
        sqlx::query(&sql("DELETE FROM provisioners WHERE last_beat_at < ?"))
            .bind(forget_before)
            .execute(&mut *tx)
            .await
            .map_err(db_error("provisioner"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(())
    }

    pub(crate) async fn waiting_job_tags(
        &self,
        queued_before: i64,
    ) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let rows = sqlx::query(&sql(
            "SELECT j.build_id, t.tag FROM jobs j JOIN builds b ON b.id = j.build_id \
             LEFT JOIN template_version_tags t ON t.template_version_id = b.template_version_id \
             WHERE j.status = 'queued' AND j.created_at < ? ORDER BY j.build_id, t.tag",
        ))
        .bind(queued_before)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("job"))?;
        rows.iter()
            .map(|row| Ok((row.try_get("build_id")?, row.try_get("tag")?)))
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(StoreError::Database)
    }

    pub(crate) async fn live_provisioner_tags(
        &self,
        beat_since: i64,
    ) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar(&sql(
            "SELECT DISTINCT tags FROM provisioners WHERE last_beat_at >= ?",
        ))
        .bind(beat_since)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("provisioner"))
    }

    pub(crate) async fn host_is_live(&self, host: &str, beat_since: i64) -> Result<bool, StoreError> {
        sqlx::query_scalar(&sql(
            "SELECT EXISTS (SELECT 1 FROM provisioners WHERE host = ? AND last_beat_at >= ?)",
        ))
        .bind(host)
        .bind(beat_since)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("provisioner"))
    }

    pub(crate) async fn jobs_waiting_for_absent_hosts(
        &self,
        beat_since: i64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let rows = sqlx::query(&sql(
            "SELECT j.build_id, w.host FROM jobs j JOIN builds b ON b.id = j.build_id \
             JOIN workspaces w ON w.id = b.workspace_id \
             WHERE j.status = 'queued' AND w.host IS NOT NULL \
             AND (j.waiting_for_host IS NULL OR j.waiting_for_host <> w.host) \
             AND NOT EXISTS (SELECT 1 FROM provisioners p \
                 WHERE p.host = w.host AND p.last_beat_at >= ?) \
             ORDER BY j.created_at, j.build_id",
        ))
        .bind(beat_since)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("job"))?;
        rows.iter()
            .map(|row| Ok((row.try_get("build_id")?, row.try_get("host")?)))
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(StoreError::Database)
    }

    pub(crate) async fn note_waiting_for_host(
        &self,
        build_id: &str,
        host: &str,
    ) -> Result<bool, StoreError> {
        let noted = sqlx::query(&sql(
            "UPDATE jobs SET waiting_for_host = ? WHERE build_id = ? AND status = 'queued' \
             AND (waiting_for_host IS NULL OR waiting_for_host <> ?)",
        ))
        .bind(host)
        .bind(build_id)
        .bind(host)
        .execute(&self.pool)
        .await
        .map_err(db_error("job"))?;
        Ok(noted.rows_affected() > 0)
    }

    pub(crate) async fn unserved_candidates(
        &self,
        queued_before: i64,
    ) -> Result<Vec<(String, Option<String>, Option<String>)>, StoreError> {
        let rows = sqlx::query(&sql(
            "SELECT j.build_id, t.tag, j.unserved FROM jobs j JOIN builds b ON b.id = j.build_id \
             LEFT JOIN template_version_tags t ON t.template_version_id = b.template_version_id \
             WHERE j.status = 'queued' AND j.created_at < ? ORDER BY j.build_id, t.tag",
        ))
        .bind(queued_before)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("job"))?;
        rows.iter()
            .map(|row| Ok((row.try_get("build_id")?, row.try_get("tag")?, row.try_get("unserved")?)))
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(StoreError::Database)
    }

    pub(crate) async fn note_unserved(
        &self,
        build_id: &str,
        note: Option<&str>,
    ) -> Result<bool, StoreError> {
        let noted = sqlx::query(&sql(
            "UPDATE jobs SET unserved = ? WHERE build_id = ? AND status = 'queued' \
             AND ((unserved IS NULL AND ? IS NOT NULL) OR (unserved IS NOT NULL AND ? IS NULL) \
             OR unserved <> ?)",
        ))
        .bind(note)
        .bind(build_id)
        .bind(note)
        .bind(note)
        .bind(note)
        .execute(&self.pool)
        .await
        .map_err(db_error("job"))?;
        Ok(noted.rows_affected() > 0)
    }

    pub(crate) async fn live_provisioner_groups(
        &self,
        beat_since: i64,
    ) -> Result<Vec<(String, ProvisionerKind, String, i64)>, StoreError> {
        let rows = sqlx::query(&sql(
            "SELECT host, kind, tags, COUNT(*) AS count FROM provisioners \
             WHERE last_beat_at >= ? GROUP BY host, kind, tags ORDER BY host, kind, tags",
        ))
        .bind(beat_since)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("provisioner"))?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("host")?,
                    row.try_get("kind")?,
                    row.try_get("tags")?,
                    row.try_get("count")?,
                ))
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()
            .map_err(StoreError::Database)
    }

    pub(crate) async fn forget_provisioners(&self, server_id: &str) -> Result<(), StoreError> {
        sqlx::query(&sql("DELETE FROM provisioners WHERE server_id = ?"))
            .bind(server_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("provisioner"))?;
        Ok(())
    }

    pub(crate) async fn list_provisioner_page(
        &self,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Page<ProvisionerRow>, StoreError> {
        let after = after
            .map(|cursor| decode_cursor(PROVISIONER_CURSOR, cursor, 2))
            .transpose()?;
        let (after_server, after_name) = match &after {
            Some(key) => (Some(key[0].as_str()), Some(key[1].as_str())),
            None => (None, None),
        };
        let rows: Vec<ProvisionerRow> = sqlx::query_as(&sql(
            "SELECT p.server_id, p.name, p.host, p.kind, p.tags, p.version, p.started_at, p.last_beat_at, \
             b.number AS build_number, b.transition AS build_transition, \
             bu.username || '/' || bw.name AS build_workspace, \
             pu.username || '/' || pw.name AS preview_workspace \
             FROM provisioners p \
             LEFT JOIN jobs j ON j.id = (SELECT id FROM jobs WHERE lease_holder = p.server_id \
                 AND worker = p.name AND status = 'claimed' ORDER BY claimed_at DESC LIMIT 1) \
             LEFT JOIN builds b ON b.id = j.build_id \
             LEFT JOIN workspaces bw ON bw.id = b.workspace_id \
             LEFT JOIN users bu ON bu.id = bw.owner_id \
             LEFT JOIN preview_results r ON r.id = (SELECT id FROM preview_results \
                 WHERE lease_holder = p.server_id AND worker = p.name AND status = 'running' \
                 ORDER BY started_at DESC LIMIT 1) \
             LEFT JOIN workspaces pw ON pw.id = r.workspace_id \
             LEFT JOIN users pu ON pu.id = pw.owner_id \
             WHERE (?1 IS NULL OR p.server_id > ?1 OR (p.server_id = ?1 AND p.name > ?2)) \
             ORDER BY p.server_id, p.name LIMIT ?3",
        ))
        .bind(after_server)
        .bind(after_name)
        .bind(limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("provisioner"))?;
        Ok(paged(rows, limit, |row| {
            encode_cursor(PROVISIONER_CURSOR, &[&row.server_id, &row.name])
        }))
    }
    };
}

pub(crate) use provisioner_queries;
