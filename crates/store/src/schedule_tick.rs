//! What one tick of the lifecycle scheduler reads and writes: every live
//! workspace with what the decision needs (its latest build, schedule,
//! deadlines, use and dormancy) and every template's policy, in one
//! transaction of two queries; and the few facts the tick records
//! (deadlines after a start, dormancy, a deletion notice).

use crate::records::{BuildReason, BuildStatus, Transition};

/// A template's lifecycle policy as stored (milliseconds; 0 turns a rule off).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PolicyRow {
    pub template_id: String,
    pub active_version_id: Option<String>,
    pub default_ttl_ms: i64,
    pub activity_bump_ms: i64,
    pub max_ttl_ms: i64,
    /// `mon,tue,...`
    pub autostart_days: String,
    pub allow_user_autostart: bool,
    pub allow_user_autostop: bool,
    pub failure_ttl_ms: i64,
    pub dormancy_threshold_ms: i64,
    pub dormancy_auto_deletion_ms: i64,
    pub require_active_version: bool,
}

/// A live workspace as the scheduler sees it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TickRow {
    pub workspace_id: String,
    pub template_id: String,
    pub template_version_id: String,
    /// Owned by a system user (a prebuild pool's).
    pub system_owner: bool,
    pub created_at: i64,
    pub autostart_cron: Option<String>,
    pub autostart_timezone: Option<String>,
    pub ttl_ms: Option<i64>,
    pub deadline: Option<i64>,
    pub max_deadline: Option<i64>,
    pub last_used_at: Option<i64>,
    pub dormant_at: Option<i64>,
    pub deleting_at: Option<i64>,
    pub deletion_notified_at: Option<i64>,
    pub build_transition: Transition,
    pub build_status: BuildStatus,
    pub build_reason: BuildReason,
    pub build_created_at: i64,
    pub build_finished_at: Option<i64>,
    /// The guard report of the latest build when it failed (to tell a
    /// blocked plan from a failed run); `None` otherwise.
    pub failed_guard_report: Option<String>,
}

/// One tick's facts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickSnapshot {
    pub policies: Vec<PolicyRow>,
    pub workspaces: Vec<TickRow>,
}

pub(crate) const TICK_POLICIES: &str = "SELECT id AS template_id, active_version_id, \
     default_ttl_ms, activity_bump_ms, max_ttl_ms, autostart_days, allow_user_autostart, \
     allow_user_autostop, failure_ttl_ms, dormancy_threshold_ms, dormancy_auto_deletion_ms, \
     require_active_version FROM templates ORDER BY id";

pub(crate) const TICK_WORKSPACES: &str = "SELECT w.id AS workspace_id, w.template_id, \
     w.template_version_id, u.system AS system_owner, w.created_at, w.autostart_cron, \
     w.autostart_timezone, w.ttl_ms, w.deadline, w.max_deadline, w.last_used_at, w.dormant_at, \
     w.deleting_at, w.deletion_notified_at, lb.transition AS build_transition, \
     lb.status AS build_status, lb.reason AS build_reason, lb.created_at AS build_created_at, \
     lb.finished_at AS build_finished_at, \
     CASE WHEN lb.status = 'failed' THEN lb.guard_report END AS failed_guard_report \
     FROM workspaces w JOIN users u ON u.id = w.owner_id \
     JOIN builds lb ON lb.workspace_id = w.id AND lb.number = ( \
         SELECT MAX(mb.number) FROM builds mb WHERE mb.workspace_id = w.id) \
     WHERE w.deleted = FALSE ORDER BY w.id";

/// The scheduler's queries of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! schedule_tick_queries {
    () => {
    pub(crate) async fn schedule_tick_snapshot(&self) -> Result<TickSnapshot, StoreError> {
        use $crate::schedule_tick::{TICK_POLICIES, TICK_WORKSPACES};
        let mut tx = self.pool.begin().await.map_err(StoreError::Database)?;
        let policies = sqlx::query_as(&sql(TICK_POLICIES))
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error("template policy"))?;
        let workspaces = sqlx::query_as(&sql(TICK_WORKSPACES))
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error("workspace"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(TickSnapshot {
            policies,
            workspaces,
        })
    }

    pub(crate) async fn set_deadlines(
        &self,
        workspace_id: &str,
        deadline: Option<i64>,
        max_deadline: Option<i64>,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql(
            "UPDATE workspaces SET deadline = ?, max_deadline = ? WHERE id = ?",
        ))
        .bind(deadline)
        .bind(max_deadline)
        .bind(workspace_id)
        .execute(&self.pool)
        .await
        .map_err(db_error("workspace"))?;
        Ok(())
    }

    pub(crate) async fn mark_dormant(
        &self,
        workspace_id: &str,
        dormant_at: i64,
        deleting_at: Option<i64>,
    ) -> Result<bool, StoreError> {
        let marked = sqlx::query(&sql(
            "UPDATE workspaces SET dormant_at = ?, deleting_at = ?, deletion_notified_at = NULL \
             WHERE id = ? AND dormant_at IS NULL AND deleted = FALSE",
        ))
        .bind(dormant_at)
        .bind(deleting_at)
        .bind(workspace_id)
        .execute(&self.pool)
        .await
        .map_err(db_error("workspace"))?;
        Ok(marked.rows_affected() == 1)
    }

    pub(crate) async fn deletion_notified(
        &self,
        workspace_id: &str,
        at: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql("UPDATE workspaces SET deletion_notified_at = ? WHERE id = ?"))
            .bind(at)
            .bind(workspace_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("workspace"))?;
        Ok(())
    }

    pub(crate) async fn workspace_ttl_ms(&self, workspace_id: &str) -> Result<Option<i64>, StoreError> {
        sqlx::query_scalar(&sql("SELECT ttl_ms FROM workspaces WHERE id = ?"))
            .bind(workspace_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("workspace"))
    }

    pub(crate) async fn template_policy_row(
        &self,
        template_id: &str,
    ) -> Result<PolicyRow, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{} WHERE id = ?",
            $crate::schedule_tick::TICK_POLICIES.replace(" ORDER BY id", "")
        )))
        .bind(template_id)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("template"))
    }
    };
}

pub(crate) use schedule_tick_queries;
