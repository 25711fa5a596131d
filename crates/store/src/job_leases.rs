//! Who runs each claimed job, for several servers on one database.
//!
//! A server claims a job under its own id (`lease_holder`) and keeps renewing
//! the lease of every job it holds in one statement while it lives. The
//! queries here are what the control plane's lease keeper and its start-up
//! recovery need: renew mine, find the builds I held, find the builds whose
//! holder stopped renewing.

from_row! {
    /// A running build whose server stopped renewing its job's lease.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ExpiredJobLease {
        pub build_id: String,
        /// The server id that held it.
        pub holder: String,
        /// When the lease ran out (Unix ms).
        pub expires_at: i64,
    }
}

/// Announcements that a job was queued, from any server on the database
/// (PostgreSQL `LISTEN abode_jobs`). A lost connection is made again by the
/// next [`JobAnnouncements::next`]; what was announced meanwhile is found by
/// the workers' periodic look at the queue.
pub struct JobAnnouncements {
    pub(crate) listener: sqlx::postgres::PgListener,
}

/// The channel of job announcements.
pub(crate) const JOB_CHANNEL: &str = "abode_jobs";

impl JobAnnouncements {
    /// Waits for the next announcement.
    pub async fn next(&mut self) -> Result<(), crate::StoreError> {
        self.listener
            .recv()
            .await
            .map(|_| ())
            .map_err(crate::StoreError::Database)
    }
}

/// The condition a job's `worker` meets: any, or the one given (bound
/// after the query's other parameters).
pub(crate) fn of_worker(worker: Option<&str>) -> &'static str {
    match worker {
        Some(_) => " AND worker = ?",
        None => "",
    }
}

/// The job-lease queries of [`crate::Store`]; expanded inside each backend's
/// `impl`.
macro_rules! job_lease_queries {
    () => {
    pub(crate) async fn renew_job_leases(
        &self,
        holder: &str,
        ttl_ms: i64,
    ) -> Result<u64, StoreError> {
        let until = self.now_ms().saturating_add(ttl_ms);
        let renewed = sqlx::query(&sql(
            "UPDATE jobs SET lease_expires_at = ? WHERE status = 'claimed' AND lease_holder = ?",
        ))
        .bind(until)
        .bind(holder)
        .execute(&self.pool)
        .await
        .map_err(db_error("job"))?;
        Ok(renewed.rows_affected())
    }

    pub(crate) async fn running_builds_of(&self, holder: &str) -> Result<Vec<String>, StoreError> {
        let rows = sqlx::query(&sql(
            "SELECT b.id FROM builds b JOIN jobs j ON j.build_id = b.id \
             WHERE b.status = 'running' AND (j.lease_holder = ? OR j.lease_holder IS NULL) \
             ORDER BY b.created_at, b.id",
        ))
        .bind(holder)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("build"))?;
        rows.iter()
            .map(|row| row.try_get("id").map_err(StoreError::Database))
            .collect()
    }

    pub(crate) async fn expired_job_leases(
        &self,
        holder: &str,
    ) -> Result<Vec<ExpiredJobLease>, StoreError> {
        sqlx::query_as(&sql(
            "SELECT b.id AS build_id, j.lease_holder AS holder, j.lease_expires_at AS expires_at \
             FROM jobs j JOIN builds b ON b.id = j.build_id \
             WHERE j.status = 'claimed' AND j.lease_expires_at < ? AND j.lease_holder <> ? \
             AND b.status = 'running' ORDER BY j.lease_expires_at, b.id",
        ))
        .bind(self.now_ms())
        .bind(holder)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("job"))
    }

    pub(crate) async fn salvage_build(
        &self,
        lease: &ExpiredJobLease,
        error: &str,
        notices: &[NewNotification],
    ) -> Result<bool, StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        // Only the lease as it was seen: renewed, re-claimed or ended since,
        // the build is not this salvage's to fail.
        let failed = sqlx::query(&sql(
            "UPDATE builds SET status = 'failed', error = ?, finished_at = ?, \
             parameters = COALESCE(workspace_parameters, parameters) \
             WHERE id = ? AND status = 'running' AND EXISTS (SELECT 1 FROM jobs j \
             WHERE j.build_id = ? AND j.status = 'claimed' AND j.lease_holder = ? \
             AND j.lease_expires_at = ?)",
        ))
        .bind(error)
        .bind(now)
        .bind(&lease.build_id)
        .bind(&lease.build_id)
        .bind(&lease.holder)
        .bind(lease.expires_at)
        .execute(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        if failed.rows_affected() == 0 {
            tx.rollback().await.map_err(StoreError::Database)?;
            return Ok(false);
        }
        sqlx::query(&sql("UPDATE jobs SET status = 'done', finished_at = ? WHERE build_id = ?"))
            .bind(now)
            .bind(&lease.build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("job"))?;
        // Its holder may still be running Terraform: the workspace stays
        // locked by it until it reports its Terraform ended or a person
        // unlocks the workspace.
        sqlx::query(&sql("UPDATE state_locks SET lost_at = ? WHERE build_id = ?"))
            .bind(now)
            .bind(&lease.build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("state lock"))?;
        // A confirmed plan is never applied twice.
        sqlx::query(&sql("DELETE FROM saved_plans WHERE build_id = ?"))
            .bind(&lease.build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("saved plan"))?;
        self.insert_notifications(&mut tx, notices).await?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(true)
    }

    pub(crate) async fn requeue_unjudged_job(
        &self,
        lease: &ExpiredJobLease,
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        // Only a whole build's job whose plan was never judged: nothing of
        // it can have been applied (an apply follows a verdict, and a
        // confirmed plan's job applies at once, so it is never requeued).
        let requeued = sqlx::query(&sql(
            "UPDATE builds SET status = 'pending', started_at = NULL \
             WHERE id = ? AND status = 'running' AND plan_json IS NULL AND EXISTS (SELECT 1 FROM jobs j \
             WHERE j.build_id = ? AND j.status = 'claimed' AND j.kind = 'build' \
             AND j.lease_holder = ? AND j.lease_expires_at = ?)",
        ))
        .bind(&lease.build_id)
        .bind(&lease.build_id)
        .bind(&lease.holder)
        .bind(lease.expires_at)
        .execute(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        if requeued.rows_affected() == 0 {
            tx.rollback().await.map_err(StoreError::Database)?;
            return Ok(false);
        }
        sqlx::query(&sql(
            "UPDATE jobs SET status = 'queued', worker = NULL, claimed_at = NULL, \
             lease_holder = NULL, lease_expires_at = NULL WHERE build_id = ?",
        ))
        .bind(&lease.build_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("job"))?;
        // Its plan changed nothing: the run that claims it next takes the
        // state lock anew, and the old run's secret opens nothing.
        sqlx::query(&sql("DELETE FROM state_locks WHERE build_id = ?"))
            .bind(&lease.build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("state lock"))?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(true)
    }

    pub(crate) async fn renew_job_lease(
        &self,
        build_id: &str,
        holder: &str,
        worker: Option<&str>,
        ttl_ms: i64,
    ) -> Result<bool, StoreError> {
        let until = self.now_ms().saturating_add(ttl_ms);
        let text = format!(
            "UPDATE jobs SET lease_expires_at = ? \
             WHERE build_id = ? AND status = 'claimed' AND lease_holder = ?{}",
            of_worker(worker)
        );
        let text = sql(&text);
        let mut query = sqlx::query(&text)
            .bind(until)
            .bind(build_id)
            .bind(holder);
        if let Some(worker) = worker {
            query = query.bind(worker);
        }
        let renewed = query.execute(&self.pool).await.map_err(db_error("job"))?;
        Ok(renewed.rows_affected() > 0)
    }

    pub(crate) async fn claimed_job_kind(
        &self,
        build_id: &str,
        holder: &str,
        worker: Option<&str>,
    ) -> Result<Option<JobKind>, StoreError> {
        let text = format!(
            "SELECT kind FROM jobs WHERE build_id = ? AND status = 'claimed' AND lease_holder = ?{}",
            of_worker(worker)
        );
        let text = sql(&text);
        let mut query = sqlx::query_scalar(&text).bind(build_id).bind(holder);
        if let Some(worker) = worker {
            query = query.bind(worker);
        }
        query
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("job"))
    }

    pub(crate) async fn claimed_job_holder(&self, build_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(&sql(
            "SELECT lease_holder FROM jobs WHERE build_id = ? AND status = 'claimed'",
        ))
        .bind(build_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error("job"))?;
        match row {
            Some(row) => row.try_get("lease_holder").map_err(StoreError::Database),
            None => Ok(None),
        }
    }

    pub(crate) async fn job_lease_holder(&self, build_id: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query(&sql("SELECT lease_holder FROM jobs WHERE build_id = ?"))
            .bind(build_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("job"))?;
        match row {
            Some(row) => row.try_get("lease_holder").map_err(StoreError::Database),
            None => Ok(None),
        }
    }
    };
}

pub(crate) use job_lease_queries;
