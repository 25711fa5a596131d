//! Builds and what each one carries: creating a build with its queued job,
//! reading and finishing builds, the plan JSON (kept apart from the build
//! record, pruned to the newest builds), the shared part of the job queue
//! (the claim itself differs per backend and lives in `sqlite.rs` and
//! `postgres.rs`), build logs, the Terraform state, and the build page.

use crate::records::{Build, BuildReason, BuildStatus, Transition};

pub(crate) const BUILD_SELECT: &str = "SELECT b.id, b.workspace_id, w.name AS workspace_name, \
     o.username AS owner_name, b.number, b.transition, b.status, b.template_version_id, \
     v.number AS template_version, b.initiator_id, i.username AS initiator_name, b.reason, b.parameters, \
     b.error, b.guard_report, b.created_at, b.started_at, b.finished_at, b.plan_digest, \
     b.expires_at, c.username AS confirmed_by, b.confirmed_at, b.daily_cost, b.refusal, \
     b.rename_to, b.then_start, \
     (SELECT wj.unserved FROM jobs wj WHERE wj.build_id = b.id AND wj.status = 'queued') AS waiting \
     FROM builds b \
     JOIN workspaces w ON w.id = b.workspace_id \
     JOIN users o ON o.id = w.owner_id \
     JOIN template_versions v ON v.id = b.template_version_id \
     JOIN users i ON i.id = b.initiator_id \
     LEFT JOIN users c ON c.id = b.confirmed_by";

from_row! {
    /// A build as [`BUILD_SELECT`] reads it, its guard report still text; it
    /// becomes a [`Build`] only when the report reads.
    pub(crate) struct BuildRow {
        id: String,
        workspace_id: String,
        workspace_name: String,
        owner_name: String,
        number: i64,
        transition: Transition,
        status: BuildStatus,
        template_version_id: String,
        template_version: i64,
        initiator_id: String,
        initiator_name: String,
        reason: BuildReason,
        /// The parameters' JSON text: only `stored::build_parameters` reads it.
        parameters_json: Option<String> = "parameters",
        error: Option<String>,
        /// The report's JSON text: only `stored::guard_report` reads it.
        report_json: Option<String> = "guard_report",
        created_at: i64,
        started_at: Option<i64>,
        finished_at: Option<i64>,
        plan_digest: Option<String>,
        expires_at: Option<i64>,
        confirmed_by: Option<String>,
        confirmed_at: Option<i64>,
        daily_cost: Option<i64>,
        refusal: Option<String>,
        rename_to: Option<String>,
        then_start: bool,
        waiting: Option<String>,
    }
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for Build
where
    BuildRow: sqlx::FromRow<'r, R>,
{
    fn from_row(row: &'r R) -> Result<Build, sqlx::Error> {
        let row = BuildRow::from_row(row)?;
        let guard_report = crate::stored::guard_report(&row.id, row.report_json)?;
        let parameters = crate::stored::build_parameters(&row.id, row.parameters_json)?;
        Ok(Build {
            id: row.id,
            workspace_id: row.workspace_id,
            workspace_name: row.workspace_name,
            owner_name: row.owner_name,
            number: row.number,
            transition: row.transition,
            status: row.status,
            template_version_id: row.template_version_id,
            template_version: row.template_version,
            initiator_id: row.initiator_id,
            initiator_name: row.initiator_name,
            reason: row.reason,
            parameters,
            error: row.error,
            guard_report,
            created_at: row.created_at,
            started_at: row.started_at,
            finished_at: row.finished_at,
            plan_digest: row.plan_digest,
            expires_at: row.expires_at,
            confirmed_by: row.confirmed_by,
            confirmed_at: row.confirmed_at,
            daily_cost: row.daily_cost,
            refusal: row.refusal,
            rename_to: row.rename_to,
            then_start: row.then_start,
            waiting: row.waiting,
        })
    }
}

/// The build, job, log and state methods of [`crate::Store`]; expanded
/// inside each backend's `impl` with its database type.
macro_rules! build_queries {
    ($db:ty) => {
    pub(crate) async fn create_build(&self, build: &NewBuild) -> Result<Build, StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        // Writing first takes the write lock (see the module doc). The
        // workspace stays on its version until a build of another succeeds
        // (`finish_build`).
        let moved = sqlx::query(
            &sql("UPDATE workspaces SET updated_at = ? WHERE id = ? AND deleted = FALSE"),
        )
        .bind(now)
        .bind(&build.workspace_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("workspace"))?;
        if moved.rows_affected() == 0 {
            return Err(StoreError::NotFound("workspace"));
        }
        Self::insert_next_build(&mut tx, build, now).await?;
        tx.commit().await.map_err(StoreError::Database)?;
        self.build_by_id(&build.id).await
    }

    pub(crate) async fn build_by_id(&self, id: &str) -> Result<Build, StoreError> {
        sqlx::query_as(&sql(&format!("{BUILD_SELECT} WHERE b.id = ?")))
            .bind(id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("build"))
    }

    pub(crate) async fn build_by_number(
        &self,
        workspace_id: &str,
        number: i64,
    ) -> Result<Build, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{BUILD_SELECT} WHERE b.workspace_id = ? AND b.number = ?"
        )))
        .bind(workspace_id)
        .bind(number)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("build"))
    }

    pub(crate) async fn latest_build(&self, workspace_id: &str) -> Result<Build, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{BUILD_SELECT} WHERE b.workspace_id = ? ORDER BY b.number DESC LIMIT 1"
        )))
        .bind(workspace_id)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("build"))
    }

    pub(crate) async fn latest_succeeded_build(
        &self,
        workspace_id: &str,
    ) -> Result<Option<Build>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{BUILD_SELECT} WHERE b.workspace_id = ? AND b.status = 'succeeded' \
             ORDER BY b.number DESC LIMIT 1"
        )))
        .bind(workspace_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error("build"))
    }

    pub(crate) async fn list_builds(&self, workspace_id: &str) -> Result<Vec<Build>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{BUILD_SELECT} WHERE b.workspace_id = ? ORDER BY b.number DESC"
        )))
        .bind(workspace_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("build"))
    }

    pub(crate) async fn set_build_plan(
        &self,
        build_id: &str,
        plan_json: &str,
        guard_report: &abode_guard::Report,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql("UPDATE builds SET plan_json = ?, guard_report = ? WHERE id = ?"))
            .bind(plan_json)
            .bind($crate::stored::guard_report_text(guard_report))
            .bind(build_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("build"))?;
        Ok(())
    }

    pub(crate) async fn set_judged_plan(
        &self,
        build_id: &str,
        holder: &str,
        plan_json: &str,
        guard_report: &abode_guard::Report,
    ) -> Result<bool, StoreError> {
        let set = sqlx::query(&sql(
            "UPDATE builds SET plan_json = ?, guard_report = ? WHERE id = ? AND guard_report IS NULL \
             AND EXISTS (SELECT 1 FROM jobs j WHERE j.build_id = ? AND j.status = 'claimed' AND j.lease_holder = ?)",
        ))
        .bind(plan_json)
        .bind($crate::stored::guard_report_text(guard_report))
        .bind(build_id)
        .bind(build_id)
        .bind(holder)
        .execute(&self.pool)
        .await
        .map_err(db_error("build"))?;
        Ok(set.rows_affected() > 0)
    }

    pub(crate) async fn prune_plan_json(
        &self,
        workspace_id: &str,
        keep: i64,
    ) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(&sql(
            "UPDATE builds SET plan_json = NULL \
             WHERE workspace_id = ? AND plan_json IS NOT NULL \
             AND status IN ('succeeded', 'failed', 'canceled') \
             AND number <= (SELECT number FROM builds WHERE workspace_id = ? \
                            ORDER BY number DESC LIMIT 1 OFFSET ?) \
             RETURNING id",
        ))
        .bind(workspace_id)
        .bind(workspace_id)
        .bind(keep)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("build"))?;
        rows.iter()
            .map(|row| row.try_get("id").map_err(StoreError::Database))
            .collect()
    }

    pub(crate) async fn build_plan_json(
        &self,
        build_id: &str,
    ) -> Result<Option<String>, StoreError> {
        sqlx::query(&sql("SELECT plan_json FROM builds WHERE id = ?"))
            .bind(build_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("build"))?
            .try_get("plan_json")
            .map_err(StoreError::Database)
    }

    pub(crate) async fn finish_build(
        &self,
        build_id: &str,
        status: BuildStatus,
        error: Option<&str>,
    ) -> Result<bool, StoreError> {
        self.finish_build_notifying(build_id, status, error, &[]).await
    }

    pub(crate) async fn finish_build_notifying(
        &self,
        build_id: &str,
        status: BuildStatus,
        error: Option<&str>,
        notices: &[NewNotification],
    ) -> Result<bool, StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        // A rename's new name is checked again here, where the workspace
        // takes it: a workspace of the same owner that took the name while
        // the build ran keeps it, and this build fails saying so.
        let mut status = status;
        let mut error = error.map(str::to_string);
        if status == BuildStatus::Succeeded {
            if let Some(clash) = Self::rename_clash(&mut tx, build_id).await? {
                status = BuildStatus::Failed;
                error = Some(clash);
            }
        }
        let result = sqlx::query(
            &sql("UPDATE builds SET status = ?, error = ?, finished_at = ?, \
             parameters = COALESCE(workspace_parameters, parameters) \
             WHERE id = ? AND status IN ('pending', 'running')"),
        )
        .bind(status.as_str())
        .bind(error.as_deref())
        .bind(now)
        .bind(build_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        if status == BuildStatus::Succeeded && result.rows_affected() > 0 {
            // A rename's workspace takes the name its build planned under,
            // only now that the build succeeded.
            sqlx::query(&sql(
                "UPDATE workspaces SET name = (SELECT b.rename_to FROM builds b WHERE b.id = ?) \
                 WHERE id = (SELECT b.workspace_id FROM builds b WHERE b.id = ?) \
                 AND EXISTS (SELECT 1 FROM builds b WHERE b.id = ? AND b.rename_to IS NOT NULL)",
            ))
            .bind(build_id)
            .bind(build_id)
            .bind(build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("workspace name"))?;
            // What the workspace now is: the version (and parameters) this
            // build applied.
            sqlx::query(&sql(
                "UPDATE workspaces SET \
                 template_version_id = (SELECT b.template_version_id FROM builds b WHERE b.id = ?), \
                 parameters = COALESCE((SELECT COALESCE(b.workspace_parameters, b.parameters) \
                     FROM builds b WHERE b.id = ?), parameters), \
                 updated_at = ? \
                 WHERE id = (SELECT b.workspace_id FROM builds b WHERE b.id = ?)",
            ))
            .bind(build_id)
            .bind(build_id)
            .bind(now)
            .bind(build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("workspace"))?;
        }
        sqlx::query(&sql("UPDATE jobs SET status = 'done', finished_at = ? WHERE build_id = ? AND status != 'done'"))
            .bind(now)
            .bind(build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("job"))?;
        if result.rows_affected() > 0 {
            self.insert_notifications(&mut tx, notices).await?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(result.rows_affected() > 0)
    }

    pub(crate) async fn workspace_name_in_use(
        &self,
        owner_id: &str,
        name: &str,
        workspace_id: &str,
    ) -> Result<bool, StoreError> {
        let row = sqlx::query(&sql(
            "SELECT EXISTS (SELECT 1 FROM workspaces w WHERE w.owner_id = ?1 AND w.name = ?2 \
             AND w.deleted = FALSE AND w.id != ?3) \
             OR EXISTS (SELECT 1 FROM builds b JOIN workspaces w ON w.id = b.workspace_id \
             WHERE w.owner_id = ?1 AND b.rename_to = ?2 AND w.id != ?3 AND w.deleted = FALSE \
             AND b.status IN ('pending', 'running', 'awaiting_confirmation')) AS in_use",
        ))
        .bind(owner_id)
        .bind(name)
        .bind(workspace_id)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("workspace"))?;
        row.try_get("in_use").map_err(StoreError::Database)
    }

    pub(crate) async fn restarts_to_continue(&self) -> Result<Vec<Build>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{BUILD_SELECT} WHERE b.then_start = TRUE AND b.status = 'succeeded' \
             AND w.deleted = FALSE AND b.number = (SELECT MAX(mb.number) FROM builds mb \
             WHERE mb.workspace_id = b.workspace_id) ORDER BY b.finished_at"
        )))
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("build"))
    }

    /// Why a rename build cannot give its workspace its new name now (the
    /// owner has another live workspace of that name), if it cannot; `None`
    /// for any other build.
    async fn rename_clash(
        tx: &mut sqlx::Transaction<'_, $db>,
        build_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let clash = sqlx::query(&sql(
            "SELECT b.rename_to, w.name FROM builds b JOIN workspaces w ON w.id = b.workspace_id \
             WHERE b.id = ? AND b.rename_to IS NOT NULL AND EXISTS (SELECT 1 FROM workspaces o \
             WHERE o.owner_id = w.owner_id AND o.name = b.rename_to AND o.deleted = FALSE \
             AND o.id != w.id)",
        ))
        .bind(build_id)
        .fetch_optional(&mut **tx)
        .await
        .map_err(db_error("build"))?;
        let Some(row) = clash else {
            return Ok(None);
        };
        let new_name: String = row.try_get("rename_to").map_err(StoreError::Database)?;
        let old_name: String = row.try_get("name").map_err(StoreError::Database)?;
        Ok(Some(format!(
            "the rename applied its plan, but another workspace named \"{new_name}\" was made \
             meanwhile: this one keeps its name \"{old_name}\", and its next build plans under it"
        )))
    }

    pub(crate) async fn cancel_pending_build(
        &self,
        build_id: &str,
        error: &str,
    ) -> Result<bool, StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let result = sqlx::query(
            &sql("UPDATE builds SET status = 'canceled', error = ?, finished_at = ?, \
             parameters = COALESCE(workspace_parameters, parameters) \
             WHERE id = ? AND status IN ('pending', 'awaiting_confirmation')"),
        )
        .bind(error)
        .bind(now)
        .bind(build_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        if result.rows_affected() > 0 {
            sqlx::query(&sql("DELETE FROM saved_plans WHERE build_id = ?"))
                .bind(build_id)
                .execute(&mut *tx)
                .await
                .map_err(db_error("saved plan"))?;
            sqlx::query(
                &sql("UPDATE jobs SET status = 'done', finished_at = ? WHERE build_id = ? AND status = 'queued'"),
            )
            .bind(now)
            .bind(build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("job"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(result.rows_affected() > 0)
    }

    pub(crate) async fn refuse_pending_build(
        &self,
        build_id: &str,
        error: &str,
        cost: i64,
    ) -> Result<bool, StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let result = sqlx::query(&sql(
            "UPDATE builds SET status = 'failed', error = ?, finished_at = ?, \
             refusal = 'quota', refused_cost = ?, \
             parameters = COALESCE(workspace_parameters, parameters) \
             WHERE id = ? AND status = 'pending'",
        ))
        .bind(error)
        .bind(now)
        .bind(cost)
        .bind(build_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        if result.rows_affected() > 0 {
            sqlx::query(&sql(
                "UPDATE jobs SET status = 'done', finished_at = ? WHERE build_id = ? AND status = 'queued'",
            ))
            .bind(now)
            .bind(build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("job"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(result.rows_affected() > 0)
    }

    // ---- the job queue ----

    pub(crate) async fn request_cancel(&self, build_id: &str) -> Result<(), StoreError> {
        sqlx::query(&sql("UPDATE jobs SET cancel_requested = TRUE WHERE build_id = ?"))
            .bind(build_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("job"))?;
        Ok(())
    }

    pub(crate) async fn cancel_requested(&self, build_id: &str) -> Result<bool, StoreError> {
        sqlx::query(&sql("SELECT cancel_requested FROM jobs WHERE build_id = ?"))
            .bind(build_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("job"))?
            .try_get("cancel_requested")
            .map_err(StoreError::Database)
    }

    // ---- build logs ----

    pub(crate) async fn append_log(
        &self,
        build_id: &str,
        line: &NewLogLine,
    ) -> Result<i64, StoreError> {
        // Two writers of one build's log (the provisioner and a cancel) can
        // pick the same next `seq` where writes are not serialised
        // (PostgreSQL): the loser simply takes the next one.
        let mut attempts = 0;
        loop {
            let inserted = sqlx::query(
                &sql("INSERT INTO build_logs (build_id, seq, time, stage, level, text) VALUES \
                 (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM build_logs WHERE build_id = ?1), ?2, ?3, ?4, ?5) \
                 RETURNING seq"),
            )
            .bind(build_id)
            .bind(self.now_ms())
            .bind(line.stage.as_str())
            .bind(line.level.as_str())
            .bind(&line.text)
            // Run to its end, so that a commit that fails is seen (`returned_row`).
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("build log"));
            match inserted {
                Err(StoreError::Conflict(_)) if attempts < 20 => attempts += 1,
                other => {
                    return crate::error::returned_row(other?, "build log")?
                        .try_get("seq")
                        .map_err(StoreError::Database)
                }
            }
        }
    }

    pub(crate) async fn logs_after(
        &self,
        build_id: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<LogLine>, StoreError> {
        sqlx::query_as(
            &sql("SELECT seq, time, stage, level, text FROM build_logs \
             WHERE build_id = ? AND seq > ? ORDER BY seq LIMIT ?"),
        )
        .bind(build_id)
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("build log"))
    }

    // ---- workspace state ----

    pub(crate) async fn put_state(
        &self,
        workspace_id: &str,
        build_id: &str,
        state: &[u8],
    ) -> Result<(), StoreError> {
        sqlx::query(
            &sql("INSERT INTO workspace_states (workspace_id, build_id, state, updated_at) VALUES (?, ?, ?, ?) \
             ON CONFLICT (workspace_id) DO UPDATE SET build_id = excluded.build_id, \
             state = excluded.state, updated_at = excluded.updated_at"),
        )
        .bind(workspace_id)
        .bind(build_id)
        .bind(state)
        .bind(self.now_ms())
        .execute(&self.pool)
        .await
        .map_err(db_error("workspace state"))?;
        Ok(())
    }

    pub(crate) async fn put_state_replacing(
        &self,
        workspace_id: &str,
        build_id: &str,
        state: &[u8],
        previous: Option<&[u8]>,
        placement: Placement,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let written = self
            .write_state_on(&mut tx, workspace_id, build_id, state, previous, placement)
            .await?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(written)
    }

    /// Writes `state` as the workspace's over `previous` (`None`: as its
    /// first), and places the workspace as `placement` says, on
    /// `connection` (a transaction's); false when the stored state was not
    /// `previous` (nothing written).
    pub(crate) async fn write_state_on(
        &self,
        connection: &mut <$db as sqlx::Database>::Connection,
        workspace_id: &str,
        build_id: &str,
        state: &[u8],
        previous: Option<&[u8]>,
        placement: Placement,
    ) -> Result<bool, StoreError> {
        let written = match previous {
            None => sqlx::query(&sql(
                "INSERT INTO workspace_states (workspace_id, build_id, state, updated_at) \
                 VALUES (?, ?, ?, ?) ON CONFLICT (workspace_id) DO NOTHING",
            ))
            .bind(workspace_id)
            .bind(build_id)
            .bind(state)
            .bind(self.now_ms())
            .execute(&mut *connection)
            .await,
            Some(previous) => sqlx::query(&sql(
                "UPDATE workspace_states SET build_id = ?, state = ?, updated_at = ? \
                 WHERE workspace_id = ? AND state = ?",
            ))
            .bind(build_id)
            .bind(state)
            .bind(self.now_ms())
            .bind(workspace_id)
            .bind(previous)
            .execute(&mut *connection)
            .await,
        }
        .map_err(db_error("workspace state"))?;
        if written.rows_affected() == 0 {
            return Ok(false);
        }
        let place = match placement {
            Placement::WritersHost => {
                "UPDATE workspaces SET host = COALESCE((SELECT j.host FROM jobs j \
                 WHERE j.build_id = ?), host) WHERE id = ?"
            }
            Placement::Nowhere => {
                "UPDATE workspaces SET host = NULL WHERE id = ? AND NOT EXISTS \
                 (SELECT 1 FROM builds b WHERE b.id = ? AND b.transition = 'delete')"
            }
        };
        let (first, second) = match placement {
            Placement::WritersHost => (build_id, workspace_id),
            Placement::Nowhere => (workspace_id, build_id),
        };
        sqlx::query(&sql(place))
            .bind(first)
            .bind(second)
            .execute(&mut *connection)
            .await
            .map_err(db_error("workspace"))?;
        Ok(true)
    }

    pub(crate) async fn state(&self, workspace_id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let row = sqlx::query(&sql("SELECT state FROM workspace_states WHERE workspace_id = ?"))
            .bind(workspace_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("workspace state"))?;
        row.map(|row| row.try_get("state").map_err(StoreError::Database))
            .transpose()
    }

    // ---- the build page ----

    pub(crate) async fn list_build_page(
        &self,
        workspace_id: &str,
        status: Option<BuildStatus>,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Page<Build>, StoreError> {
        let before = after
            .map(|cursor| decode_cursor(BUILD_CURSOR, cursor, 1).and_then(|key| parse_i64(&key[0])))
            .transpose()?;
        let rows: Vec<Build> = sqlx::query_as(&sql(&format!(
            "{BUILD_SELECT} WHERE b.workspace_id = ?1 AND (?2 IS NULL OR b.status = ?2) \
             AND (?3 IS NULL OR b.number < ?3) ORDER BY b.number DESC LIMIT ?4"
        )))
        .bind(workspace_id)
        .bind(status.map(BuildStatus::as_str))
        .bind(before)
        .bind(limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("build"))?;
        Ok(paged(rows, limit, |build| {
            encode_cursor(BUILD_CURSOR, &[&build.number.to_string()])
        }))
    }

    /// Inserts a pending build and its queued job inside the caller's transaction.
    /// Inserts the workspace's next build (numbered after its last) and its
    /// job, inside the caller's transaction.
    async fn insert_next_build(
        tx: &mut sqlx::Transaction<'_, $db>,
        build: &NewBuild,
        now: i64,
    ) -> Result<(), StoreError> {
        let number: i64 = sqlx::query(
            &sql("SELECT COALESCE(MAX(number), 0) + 1 AS next FROM builds WHERE workspace_id = ?"),
        )
        .bind(&build.workspace_id)
        .fetch_one(&mut **tx)
        .await
        .map_err(db_error("build"))?
        .try_get("next")
        .map_err(StoreError::Database)?;
        Self::insert_build(tx, build, number, now).await
    }

    async fn insert_build(
        tx: &mut sqlx::Transaction<'_, $db>,
        build: &NewBuild,
        number: i64,
        now: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            &sql("INSERT INTO builds (id, workspace_id, number, transition, status, template_version_id, \
             initiator_id, reason, parameters, workspace_parameters, created_at, retention, \
             rename_to, then_start) \
             VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        )
        .bind(&build.id)
        .bind(&build.workspace_id)
        .bind(number)
        .bind(build.transition.as_str())
        .bind(&build.template_version_id)
        .bind(&build.initiator_id)
        .bind(build.reason.as_str())
        .bind(build.parameters.as_ref().map($crate::stored::parameters_text))
        .bind(build.workspace_parameters.as_ref().map($crate::stored::parameters_text))
        .bind(now)
        .bind(build.retention.map(|retention| retention.as_str()))
        .bind(&build.rename_to)
        .bind(build.then_start)
        .execute(&mut **tx)
        .await
        .map_err(db_error("active build"))?;
        sqlx::query(&sql("INSERT INTO jobs (id, build_id, status, created_at) VALUES (?, ?, 'queued', ?)"))
            .bind(new_id())
            .bind(&build.id)
            .bind(now)
            .execute(&mut **tx)
            .await
            .map_err(db_error("job"))?;
        Ok(())
    }
    };
}

pub(crate) use build_queries;

/// The condition a claimed job's build meets for a provisioner with
/// `count` tags (bound in order where the condition stands): every tag its
/// version (`b.template_version_id`) needs is one of them.
pub(crate) fn tags_covered(count: usize) -> String {
    version_tags_covered("b.template_version_id", count)
}

/// [`tags_covered`] for the version in column `version`.
pub(crate) fn version_tags_covered(version: &str, count: usize) -> String {
    let outside = if count == 0 {
        String::new()
    } else {
        format!(" AND t.tag NOT IN ({})", vec!["?"; count].join(", "))
    };
    format!(
        "NOT EXISTS (SELECT 1 FROM template_version_tags t \
         WHERE t.template_version_id = {version}{outside})"
    )
}
