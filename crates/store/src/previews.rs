//! Fleet previews: a template version planned against the live workspaces of
//! its template, never applied. A preview is recorded with one result row per
//! workspace, chosen and ordered in the same statement; those rows are their
//! own queue (workers take one only when no build waits), claimed under a
//! lease: a preview never applies, so a row whose server died is planned
//! again, never lost. Nothing here touches a workspace's builds, state or
//! active build.

use crate::records::Transition;

/// Where one workspace's preview is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreviewStatus {
    Queued,
    Running,
    /// Planned and judged by the guard: the result has a decision.
    Planned,
    /// The plan could not be made (the error says why).
    Failed,
    /// Not planned: the workspace was deleted (or changed template) before
    /// its turn.
    Skipped,
}

/// A stored preview status none of [`PreviewStatus`] names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown preview status `{0}`")]
pub struct UnknownPreviewStatus(pub String);

crate::named!(PreviewStatus, UnknownPreviewStatus, {
    Queued => "queued",
    Running => "running",
    Planned => "planned",
    Failed => "failed",
    Skipped => "skipped",
});

/// A preview to record: of version `template_version_id`, for the live
/// workspaces of its template that are not on it, or exactly the named ones.
#[derive(Debug, Clone)]
pub struct NewPreview {
    pub id: String,
    pub template_id: String,
    pub template_version_id: String,
    pub requested_by: String,
    /// `Some`: these workspaces (ids) whatever version they are on.
    pub workspace_ids: Option<Vec<String>>,
}

from_row! {
    /// A preview with the counts of its results.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Preview {
        pub id: String,
        /// It covers named workspaces only, not the whole fleet.
        pub named: bool,
        pub template_version_id: String,
        pub template_name: String,
        pub version: i64,
        /// The username of who asked for it.
        pub requested_by: String,
        pub created_at: i64,
        pub total: i64,
        /// Queued or running.
        pub pending: i64,
        pub allowed: i64,
        /// Planned with the guard's `confirm`: a build would be held.
        pub held: i64,
        pub blocked: i64,
        pub failed: i64,
        pub skipped: i64,
        /// When its last result ended (`None` while none has).
        pub finished_at: Option<i64>,
    }
}

from_row! {
    /// A workspace's preview as the report lists it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PreviewResult {
        pub id: String,
        pub position: i64,
        pub workspace_id: String,
        pub workspace_name: String,
        pub owner_name: String,
        pub status: PreviewStatus,
        pub transition: Option<Transition>,
        /// The guard's decision's name (`allow`, `confirm`, `block`), parsed by
        /// the domain, which owns the guard's types.
        pub decision: Option<String>,
        /// The guard's report (JSON).
        pub report: Option<String>,
        pub error: Option<String>,
        pub started_at: Option<i64>,
        pub finished_at: Option<i64>,
    }
}

from_row! {
    /// A result a worker took.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ClaimedPreview {
        pub result_id: String,
        pub preview_id: String,
        pub workspace_id: String,
    }
}

/// How a workspace's preview ended.
#[derive(Debug, Clone)]
pub struct PreviewOutcome {
    pub status: PreviewStatus,
    pub transition: Option<Transition>,
    pub decision: Option<&'static str>,
    pub report: Option<String>,
    pub error: Option<String>,
}

pub(crate) const PREVIEW_RESULT_CURSOR: &str = "preview-results";

pub(crate) const PREVIEW_SELECT: &str = "SELECT p.id, p.named, p.template_version_id, \
     t.name AS template_name, v.number AS version, u.username AS requested_by, p.created_at, \
     COUNT(r.id) AS total, \
     COALESCE(SUM(CASE WHEN r.status IN ('queued', 'running') THEN 1 ELSE 0 END), 0) AS pending, \
     COALESCE(SUM(CASE WHEN r.status = 'planned' AND r.decision = 'allow' THEN 1 ELSE 0 END), 0) AS allowed, \
     COALESCE(SUM(CASE WHEN r.status = 'planned' AND r.decision = 'confirm' THEN 1 ELSE 0 END), 0) AS held, \
     COALESCE(SUM(CASE WHEN r.status = 'planned' AND r.decision = 'block' THEN 1 ELSE 0 END), 0) AS blocked, \
     COALESCE(SUM(CASE WHEN r.status = 'failed' THEN 1 ELSE 0 END), 0) AS failed, \
     COALESCE(SUM(CASE WHEN r.status = 'skipped' THEN 1 ELSE 0 END), 0) AS skipped, \
     MAX(r.finished_at) AS finished_at \
     FROM template_previews p \
     JOIN template_versions v ON v.id = p.template_version_id \
     JOIN templates t ON t.id = v.template_id \
     JOIN users u ON u.id = p.requested_by \
     LEFT JOIN preview_results r ON r.preview_id = p.id";

pub(crate) const PREVIEW_GROUP: &str =
    "GROUP BY p.id, p.named, p.template_version_id, t.name, v.number, u.username, p.created_at";

/// A result a worker may take: queued, or running under a lease that ran
/// out (its server stopped renewing it).
pub(crate) const PREVIEW_CLAIMABLE: &str =
    "(r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at < ?))";

/// The preview methods of [`crate::Store`]; expanded inside each backend's
/// `impl`.
macro_rules! preview_queries {
    () => {
    pub(crate) async fn create_preview(&self, preview: &NewPreview) -> Result<Preview, StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        sqlx::query(&sql(
            "INSERT INTO template_previews (id, template_version_id, requested_by, created_at, named) \
             VALUES (?, ?, ?, ?, ?)",
        ))
        .bind(&preview.id)
        .bind(&preview.template_version_id)
        .bind(&preview.requested_by)
        .bind(now)
        .bind(preview.workspace_ids.is_some())
        .execute(&mut *tx)
        .await
        .map_err(db_error("template version"))?;
        // The workspaces are chosen and numbered in one statement: what the
        // report lists is what was live when it was asked for.
        let chosen = match &preview.workspace_ids {
            None => "w.template_version_id <> ?".to_string(),
            Some(ids) if ids.is_empty() => "FALSE".to_string(),
            Some(ids) => format!("w.id IN ({})", vec!["?"; ids.len()].join(", ")),
        };
        let statement = format!(
            "INSERT INTO preview_results (id, preview_id, position, workspace_id, status, created_at) \
             SELECT ? || '-' || CAST(ROW_NUMBER() OVER (ORDER BY u.username, w.name, w.id) AS TEXT), ?, \
             ROW_NUMBER() OVER (ORDER BY u.username, w.name, w.id), w.id, 'queued', ? \
             FROM workspaces w JOIN users u ON u.id = w.owner_id \
             WHERE w.template_id = ? AND w.deleted = FALSE AND {chosen}"
        );
        let statement = sql(&statement);
        let mut insert = sqlx::query(&statement)
            .bind(&preview.id)
            .bind(&preview.id)
            .bind(now)
            .bind(&preview.template_id);
        match &preview.workspace_ids {
            None => insert = insert.bind(&preview.template_version_id),
            Some(ids) => {
                for id in ids {
                    insert = insert.bind(id);
                }
            }
        }
        insert.execute(&mut *tx).await.map_err(db_error("workspace"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        self.preview_by_id(&preview.id).await
    }

    pub(crate) async fn preview_by_id(&self, id: &str) -> Result<Preview, StoreError> {
        sqlx::query_as(&sql(&format!("{PREVIEW_SELECT} WHERE p.id = ? {PREVIEW_GROUP}")))
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("preview"))
    }

    pub(crate) async fn latest_preview(
        &self,
        template_version_id: &str,
        whole_fleet: bool,
    ) -> Result<Option<Preview>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{PREVIEW_SELECT} WHERE p.id = (SELECT id FROM template_previews \
             WHERE template_version_id = ?1 AND (NOT ?2 OR named = FALSE) \
             ORDER BY created_at DESC, id DESC LIMIT 1) {PREVIEW_GROUP}"
        )))
        .bind(template_version_id)
        .bind(whole_fleet)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error("preview"))
    }

    pub(crate) async fn latest_fleet_preview_of_archive(
        &self,
        template_id: &str,
        archive_sha256: &str,
    ) -> Result<Option<Preview>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{PREVIEW_SELECT} WHERE p.id = (SELECT tp.id FROM template_previews tp \
             JOIN template_versions tv ON tv.id = tp.template_version_id \
             WHERE tv.template_id = ?1 AND tv.archive_sha256 = ?2 AND tp.named = FALSE \
             ORDER BY tp.created_at DESC, tp.id DESC LIMIT 1) {PREVIEW_GROUP}"
        )))
        .bind(template_id)
        .bind(archive_sha256)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error("preview"))
    }

    pub(crate) async fn claim_preview(
        &self,
        worker: &str,
        holder: &str,
        lease_ms: i64,
        tags: &[String],
    ) -> Result<Option<ClaimedPreview>, StoreError> {
        let now = self.now_ms();
        // The condition is checked again by the update itself: of two
        // servers that picked the same row, one takes it, the other none.
        // A preview's plan needs the tags of its version, as its builds do.
        let statement = sql(&format!(
            "UPDATE preview_results AS r SET status = 'running', worker = ?, lease_holder = ?, \
             lease_expires_at = ?, started_at = ? \
             WHERE r.id = (SELECT r.id FROM preview_results r \
             JOIN template_previews p ON p.id = r.preview_id \
             WHERE {PREVIEW_CLAIMABLE} AND {} \
             ORDER BY r.created_at, r.position LIMIT 1) AND {PREVIEW_CLAIMABLE} \
             RETURNING id AS result_id, preview_id, workspace_id",
            version_tags_covered("p.template_version_id", tags.len())
        ))
        .into_owned();
        let mut claim = sqlx::query_as(&statement)
            .bind(worker)
            .bind(holder)
            .bind(now.saturating_add(lease_ms))
            .bind(now)
            .bind(now);
        for tag in tags {
            claim = claim.bind(tag);
        }
        claim
            .bind(now)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("preview"))
    }

    pub(crate) async fn renew_preview_leases(
        &self,
        holder: &str,
        lease_ms: i64,
    ) -> Result<u64, StoreError> {
        let now = self.now_ms();
        let renewed = sqlx::query(&sql(
            "UPDATE preview_results SET lease_expires_at = ? \
             WHERE status = 'running' AND lease_holder = ?",
        ))
        .bind(now.saturating_add(lease_ms))
        .bind(holder)
        .execute(&self.pool)
        .await
        .map_err(db_error("preview"))?;
        Ok(renewed.rows_affected())
    }

    pub(crate) async fn finish_preview(
        &self,
        result_id: &str,
        holder: &str,
        outcome: &PreviewOutcome,
    ) -> Result<bool, StoreError> {
        let now = self.now_ms();
        let done = sqlx::query(&sql(
            "UPDATE preview_results SET status = ?, transition = ?, decision = ?, report = ?, \
             error = ?, finished_at = ?, lease_holder = NULL, lease_expires_at = NULL \
             WHERE id = ? AND status = 'running' AND lease_holder = ?",
        ))
        .bind(outcome.status.as_str())
        .bind(outcome.transition.map(|transition| transition.as_str()))
        .bind(outcome.decision)
        .bind(outcome.report.as_deref())
        .bind(outcome.error.as_deref())
        .bind(now)
        .bind(result_id)
        .bind(holder)
        .execute(&self.pool)
        .await
        .map_err(db_error("preview"))?;
        Ok(done.rows_affected() == 1)
    }

    pub(crate) async fn requeue_previews(
        &self,
        holder: &str,
        result_id: Option<&str>,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query(&sql(
            "UPDATE preview_results SET status = 'queued', lease_holder = NULL, \
             lease_expires_at = NULL, started_at = NULL \
             WHERE status = 'running' AND lease_holder = ?1 AND (?2 IS NULL OR id = ?2)",
        ))
        .bind(holder)
        .bind(result_id)
        .execute(&self.pool)
        .await
        .map_err(db_error("preview"))?;
        Ok(done.rows_affected())
    }

    pub(crate) async fn list_preview_result_page(
        &self,
        preview_id: &str,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Page<PreviewResult>, StoreError> {
        // The cursor names its preview: a page of another (a newer preview
        // started between two pages) is refused, not mixed in.
        let after = match after {
            Some(cursor) => {
                let key = decode_cursor(PREVIEW_RESULT_CURSOR, cursor, 2)?;
                if key[0] != preview_id {
                    return Err(BadCursor.into());
                }
                Some(parse_i64(&key[1])?)
            }
            None => None,
        };
        let rows: Vec<PreviewResult> = sqlx::query_as(&sql(
            "SELECT r.id, r.position, r.workspace_id, w.name AS workspace_name, \
             u.username AS owner_name, r.status, r.transition, r.decision, r.report, r.error, \
             r.started_at, r.finished_at \
             FROM preview_results r JOIN workspaces w ON w.id = r.workspace_id \
             JOIN users u ON u.id = w.owner_id \
             WHERE r.preview_id = ?1 AND (?2 IS NULL OR r.position > ?2) \
             ORDER BY r.position LIMIT ?3",
        ))
        .bind(preview_id)
        .bind(after)
        .bind(limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("preview"))?;
        Ok(paged(rows, limit, |result| {
            encode_cursor(PREVIEW_RESULT_CURSOR, &[preview_id, &result.position.to_string()])
        }))
    }
    };
}

pub(crate) use preview_queries;
