//! What one tick of the lifecycle scheduler reads and writes: every live
//! workspace with what the decision needs (its latest build, schedule,
//! deadlines, use and dormancy) and every template's policy, in one
//! transaction of two queries; and the few facts the tick records
//! (deadlines after a start, dormancy, a deletion notice).

use abode_guard::Report;

use crate::records::{BuildReason, BuildStatus, Transition};
use crate::schedule_settings::{TemplatePolicy, WorkspaceLifecycle};

/// A live workspace as the scheduler sees it; read from a row through
/// [`TickRowText`], which reads its guard report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickRow {
    /// Its schedule, deadlines, use and dormancy (with its id).
    pub lifecycle: WorkspaceLifecycle,
    pub template_id: String,
    pub template_version_id: String,
    /// The template's active version.
    pub active_version_id: Option<String>,
    /// Owned by a system user (a prebuild pool's).
    pub system_owner: bool,
    /// Whether the owner's account may act (a suspended or deleted one
    /// gets no autostart).
    pub owner_status: crate::AccountStatus,
    pub created_at: i64,
    pub build_transition: Transition,
    pub build_status: BuildStatus,
    pub build_reason: BuildReason,
    pub build_created_at: i64,
    pub build_finished_at: Option<i64>,
    /// The guard report of the latest build when it failed (to tell a
    /// blocked plan from a failed run); `None` otherwise.
    pub failed_guard_report: Option<Report>,
}

from_row! {
    /// A [`TickRow`] as [`TICK_WORKSPACES`] reads it, its guard report still
    /// text (with the build's id, to name it when it does not read).
    pub(crate) struct TickRowText {
        lifecycle: WorkspaceLifecycle = flatten,
        template_id: String,
        template_version_id: String,
        active_version_id: Option<String>,
        system_owner: bool,
        owner_status: crate::AccountStatus,
        created_at: i64,
        build_id: String,
        build_transition: Transition,
        build_status: BuildStatus,
        build_reason: BuildReason,
        build_created_at: i64,
        build_finished_at: Option<i64>,
        /// The report's JSON text: only `stored::guard_report` reads it.
        failed_report_json: Option<String> = "failed_guard_report",
    }
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for TickRow
where
    TickRowText: sqlx::FromRow<'r, R>,
{
    fn from_row(row: &'r R) -> Result<TickRow, sqlx::Error> {
        let row = TickRowText::from_row(row)?;
        let failed_guard_report =
            crate::stored::guard_report(&row.build_id, row.failed_report_json)?;
        Ok(TickRow {
            lifecycle: row.lifecycle,
            template_id: row.template_id,
            template_version_id: row.template_version_id,
            active_version_id: row.active_version_id,
            system_owner: row.system_owner,
            owner_status: row.owner_status,
            created_at: row.created_at,
            build_transition: row.build_transition,
            build_status: row.build_status,
            build_reason: row.build_reason,
            build_created_at: row.build_created_at,
            build_finished_at: row.build_finished_at,
            failed_guard_report,
        })
    }
}

/// One tick's facts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickSnapshot {
    pub policies: Vec<TemplatePolicy>,
    pub workspaces: Vec<TickRow>,
}

pub(crate) const TICK_WORKSPACES: &str = "SELECT w.id AS workspace_id, w.template_id, \
     w.template_version_id, t.active_version_id, u.system AS system_owner, u.status AS owner_status, w.created_at, w.autostart_cron, \
     w.autostart_timezone, w.ttl_ms, w.deadline, w.max_deadline, w.last_used_at, w.dormant_at, \
     w.deleting_at, w.deletion_notified_at, lb.id AS build_id, lb.transition AS build_transition, \
     lb.status AS build_status, lb.reason AS build_reason, lb.created_at AS build_created_at, \
     lb.finished_at AS build_finished_at, \
     CASE WHEN lb.status = 'failed' THEN lb.guard_report END AS failed_guard_report \
     FROM workspaces w JOIN users u ON u.id = w.owner_id \
     JOIN templates t ON t.id = w.template_id \
     JOIN builds lb ON lb.workspace_id = w.id AND lb.number = ( \
         SELECT MAX(mb.number) FROM builds mb WHERE mb.workspace_id = w.id) \
     WHERE w.deleted = FALSE ORDER BY w.id";

/// The scheduler's queries of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! scheduler_tick_queries {
    () => {
    pub(crate) async fn scheduler_tick_snapshot(&self) -> Result<TickSnapshot, StoreError> {
        use $crate::scheduler_tick::TICK_WORKSPACES;
        let mut tx = self.pool.begin().await.map_err(StoreError::Database)?;
        let policies = sqlx::query_as(&sql(&format!(
            "{} ORDER BY id",
            $crate::schedule_settings::POLICY_SELECT
        )))
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

    };
}

pub(crate) use scheduler_tick_queries;
