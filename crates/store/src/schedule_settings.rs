//! The settings side of the lifecycle scheduler (issue 13): a template's
//! policy, a workspace's schedule, its deadlines, when it was last used and
//! its dormancy. The columns come from migration 0012; they are read and
//! written here rather than through the template and workspace records so
//! that those records (and their list queries) stay as they are, and so
//! that the scheduler's own tick (`scheduler_tick.rs`) and these settings
//! share one meaning of each column (the tick's own writes, deadlines at a
//! start and marking dormant, are in `scheduler_tick.rs`). Durations and
//! times are milliseconds.

from_row! {
    /// A template's lifecycle policy as stored (see `abode_schedule::TemplatePolicy`
    /// for the meaning of each field; 0 turns a duration's rule off).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct TemplatePolicy {
        pub template_id: String,
        pub default_ttl_ms: i64,
        pub activity_bump_ms: i64,
        pub max_ttl_ms: i64,
        /// `mon,tue,...` (`abode_schedule::Weekdays`).
        pub autostart_days: String,
        pub allow_user_autostart: bool,
        pub allow_user_autostop: bool,
        pub failure_ttl_ms: i64,
        pub dormancy_threshold_ms: i64,
        pub dormancy_auto_deletion_ms: i64,
        pub require_active_version: bool,
        /// Whether workspaces of the template may be shared (issue 49).
        pub allow_sharing: bool,
    }
}

/// The columns of [`TemplatePolicy`], from `templates`.
pub(crate) const POLICY_SELECT: &str = "SELECT id AS template_id, default_ttl_ms, \
     activity_bump_ms, max_ttl_ms, autostart_days, allow_user_autostart, allow_user_autostop, \
     failure_ttl_ms, dormancy_threshold_ms, dormancy_auto_deletion_ms, require_active_version, \
     allow_sharing FROM templates";

from_row! {
    /// A workspace's schedule and lifecycle times as stored.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct WorkspaceLifecycle {
        pub workspace_id: String,
        /// Autostart: a five-field cron and its IANA time zone (both or neither).
        pub autostart_cron: Option<String>,
        pub autostart_timezone: Option<String>,
        /// The owner's autostop ttl; `None`: the template's default.
        pub ttl_ms: Option<i64>,
        pub deadline: Option<i64>,
        pub max_deadline: Option<i64>,
        pub last_used_at: Option<i64>,
        pub dormant_at: Option<i64>,
        pub deleting_at: Option<i64>,
        pub deletion_notified_at: Option<i64>,
    }
}

/// The lifecycle settings queries of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! lifecycle_queries {
    () => {
        pub(crate) async fn template_policy(
            &self,
            template_id: &str,
        ) -> Result<TemplatePolicy, StoreError> {
            sqlx::query_as(&sql(&format!(
                "{} WHERE id = ?",
                $crate::schedule_settings::POLICY_SELECT
            )))
            .bind(template_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("template"))
        }

        pub(crate) async fn set_template_policy(
            &self,
            policy: &TemplatePolicy,
        ) -> Result<(), StoreError> {
            let done = sqlx::query(&sql(
                "UPDATE templates SET default_ttl_ms = ?, activity_bump_ms = ?, max_ttl_ms = ?, \
             autostart_days = ?, allow_user_autostart = ?, allow_user_autostop = ?, \
             failure_ttl_ms = ?, dormancy_threshold_ms = ?, dormancy_auto_deletion_ms = ?, \
             require_active_version = ?, allow_sharing = ? WHERE id = ?",
            ))
            .bind(policy.default_ttl_ms)
            .bind(policy.activity_bump_ms)
            .bind(policy.max_ttl_ms)
            .bind(&policy.autostart_days)
            .bind(policy.allow_user_autostart)
            .bind(policy.allow_user_autostop)
            .bind(policy.failure_ttl_ms)
            .bind(policy.dormancy_threshold_ms)
            .bind(policy.dormancy_auto_deletion_ms)
            .bind(policy.require_active_version)
            .bind(policy.allow_sharing)
            .bind(&policy.template_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("template"))?;
            if done.rows_affected() == 0 {
                return Err(StoreError::NotFound("template"));
            }
            Ok(())
        }

        pub(crate) async fn workspace_lifecycle(
            &self,
            workspace_id: &str,
        ) -> Result<WorkspaceLifecycle, StoreError> {
            sqlx::query_as(&sql(
                "SELECT id AS workspace_id, autostart_cron, autostart_timezone, ttl_ms, deadline, \
             max_deadline, last_used_at, dormant_at, deleting_at, deletion_notified_at \
             FROM workspaces WHERE id = ?",
            ))
            .bind(workspace_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("workspace"))
        }

        /// One UPDATE of a workspace's lifecycle columns; `NotFound` when no
        /// workspace has the id.
        async fn update_workspace_lifecycle(
            &self,
            text: &str,
            workspace_id: &str,
            values: &[Option<i64>],
        ) -> Result<u64, StoreError> {
            let text = sql(text);
            let mut query = sqlx::query(&text);
            for value in values {
                query = query.bind(*value);
            }
            let done = query
                .bind(workspace_id)
                .execute(&self.pool)
                .await
                .map_err(db_error("workspace"))?;
            Ok(done.rows_affected())
        }

        pub(crate) async fn set_workspace_autostart(
            &self,
            workspace_id: &str,
            cron: Option<&str>,
            timezone: Option<&str>,
        ) -> Result<(), StoreError> {
            let done = sqlx::query(&sql(
                "UPDATE workspaces SET autostart_cron = ?, autostart_timezone = ? WHERE id = ?",
            ))
            .bind(cron)
            .bind(timezone)
            .bind(workspace_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("workspace"))?;
            if done.rows_affected() == 0 {
                return Err(StoreError::NotFound("workspace"));
            }
            Ok(())
        }

        pub(crate) async fn set_workspace_ttl(
            &self,
            workspace_id: &str,
            ttl_ms: Option<i64>,
        ) -> Result<(), StoreError> {
            let changed = self
                .update_workspace_lifecycle(
                    "UPDATE workspaces SET ttl_ms = ? WHERE id = ?",
                    workspace_id,
                    &[ttl_ms],
                )
                .await?;
            if changed == 0 {
                return Err(StoreError::NotFound("workspace"));
            }
            Ok(())
        }

        pub(crate) async fn push_workspace_deadline(
            &self,
            workspace_id: &str,
            expected: Option<i64>,
            deadline: i64,
        ) -> Result<bool, StoreError> {
            // Compare-and-set: two bumps at once never move the deadline back.
            let done = sqlx::query(&sql("UPDATE workspaces SET deadline = ? WHERE id = ? AND \
             ((deadline IS NULL AND ? IS NULL) OR deadline = ?)"))
            .bind(deadline)
            .bind(workspace_id)
            .bind(expected)
            .bind(expected)
            .execute(&self.pool)
            .await
            .map_err(db_error("workspace"))?;
            Ok(done.rows_affected() == 1)
        }

        pub(crate) async fn record_workspace_use(
            &self,
            workspace_id: &str,
            at: i64,
            older_than: i64,
        ) -> Result<bool, StoreError> {
            let changed = self
                .update_workspace_lifecycle(
                    "UPDATE workspaces SET last_used_at = ? \
                 WHERE (last_used_at IS NULL OR last_used_at < ?) AND id = ?",
                    workspace_id,
                    &[Some(at), Some(older_than)],
                )
                .await?;
            Ok(changed == 1)
        }

        pub(crate) async fn wake_workspace(
            &self,
            workspace_id: &str,
            at: i64,
        ) -> Result<bool, StoreError> {
            let changed = self
                .update_workspace_lifecycle(
                    "UPDATE workspaces SET dormant_at = NULL, deleting_at = NULL, \
                 deletion_notified_at = NULL, last_used_at = ? \
                 WHERE dormant_at IS NOT NULL AND id = ?",
                    workspace_id,
                    &[Some(at)],
                )
                .await?;
            Ok(changed == 1)
        }
    };
}

pub(crate) use lifecycle_queries;
