//! The last report of unsaved work each workspace's agent sent (issue 47):
//! one row per workspace, replaced by each report and kept past a stop, so
//! that a stopped workspace's delete is judged by what its agent last saw.

from_row! {
    /// The last report of a workspace: when the server received it and the
    /// report as the control plane wrote it (JSON it reads back as its type).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct UnsavedReportRow {
        pub made_at: i64,
        pub report: String,
    }
}

/// The unsaved work methods of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! unsaved_queries {
    () => {
        pub(crate) async fn put_unsaved_report(
            &self,
            workspace_id: &str,
            report: &str,
        ) -> Result<(), StoreError> {
            // Received now, by the store's clock: the workspace's own clock
            // is not the platform's.
            let made_at = self.now_ms();
            sqlx::query(&sql(
                "INSERT INTO workspace_unsaved_reports (workspace_id, made_at, report) \
                 VALUES (?, ?, ?) ON CONFLICT (workspace_id) \
                 DO UPDATE SET made_at = excluded.made_at, report = excluded.report",
            ))
            .bind(workspace_id)
            .bind(made_at)
            .bind(report)
            .execute(&self.pool)
            .await
            .map_err(db_error("unsaved report"))?;
            Ok(())
        }

        pub(crate) async fn unsaved_report(
            &self,
            workspace_id: &str,
        ) -> Result<Option<crate::unsaved::UnsavedReportRow>, StoreError> {
            sqlx::query_as(&sql(
                "SELECT made_at, report FROM workspace_unsaved_reports WHERE workspace_id = ?",
            ))
            .bind(workspace_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("unsaved report"))
        }

        pub(crate) async fn mark_unsaved_hold(
            &self,
            workspace_id: &str,
            digest: &str,
        ) -> Result<bool, StoreError> {
            let done = sqlx::query(&sql(
                "UPDATE workspace_unsaved_reports SET held_digest = ? \
                 WHERE workspace_id = ? AND (held_digest IS NULL OR held_digest <> ?)",
            ))
            .bind(digest)
            .bind(workspace_id)
            .bind(digest)
            .execute(&self.pool)
            .await
            .map_err(db_error("unsaved report"))?;
            Ok(done.rows_affected() == 1)
        }

        pub(crate) async fn request_unsaved_scan(
            &self,
            workspace_id: &str,
        ) -> Result<(), StoreError> {
            sqlx::query(&sql(
                "INSERT INTO workspace_unsaved_scan_requests (workspace_id, requested_at) \
                 VALUES (?, ?) ON CONFLICT (workspace_id) \
                 DO UPDATE SET requested_at = excluded.requested_at",
            ))
            .bind(workspace_id)
            .bind(self.now_ms())
            .execute(&self.pool)
            .await
            .map_err(db_error("unsaved scan request"))?;
            Ok(())
        }

        pub(crate) async fn unsaved_scan_requested(
            &self,
            workspace_id: &str,
        ) -> Result<bool, StoreError> {
            // Asked for, and no report received since (a report made in
            // the same millisecond as the request counts as after it).
            let pending: Option<i64> = sqlx::query_scalar(&sql(
                "SELECT q.requested_at FROM workspace_unsaved_scan_requests q \
                 LEFT JOIN workspace_unsaved_reports r ON r.workspace_id = q.workspace_id \
                 WHERE q.workspace_id = ? AND (r.made_at IS NULL OR r.made_at < q.requested_at)",
            ))
            .bind(workspace_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("unsaved scan request"))?;
            Ok(pending.is_some())
        }
    };
}
pub(crate) use unsaved_queries;
