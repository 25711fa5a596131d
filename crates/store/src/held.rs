//! Held builds, the guard's side of the store: holding a build for
//! confirmation with its saved plan, the single-use confirmation (audited in
//! the same transaction), saved plans, expiry of held builds, and the
//! protections a workspace remembers.

/// Which state a saved plan was made against (`saved_plans.state_backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SavedPlanState {
    /// Laid out in the work dir: a plan held before Abode was the state backend.
    Local,
    /// Abode's state backend.
    Abode,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown saved plan state backend `{0}`")]
pub struct UnknownSavedPlanState(pub String);

crate::named!(SavedPlanState, UnknownSavedPlanState, {
    Local => "local",
    Abode => "abode",
});

/// The held-build and protection methods of [`crate::Store`]; expanded
/// inside each backend's `impl`.
macro_rules! held_queries {
    () => {
    pub(crate) async fn hold_build(
        &self,
        build_id: &str,
        plan: &SavedPlan,
        expires_at: i64,
    ) -> Result<bool, StoreError> {
        self.hold_build_notifying(build_id, plan, expires_at, &[]).await
    }

    pub(crate) async fn hold_build_notifying(
        &self,
        build_id: &str,
        plan: &SavedPlan,
        expires_at: i64,
        notices: &[NewNotification],
    ) -> Result<bool, StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let result = sqlx::query(
            &sql("UPDATE builds SET status = 'awaiting_confirmation', plan_digest = ?, expires_at = ?, \
             parameters = COALESCE(workspace_parameters, parameters) \
             WHERE id = ? AND status = 'running'"),
        )
        .bind(&plan.digest)
        .bind(expires_at)
        .bind(build_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        if result.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            &sql("INSERT INTO saved_plans (build_id, plan, digest, state_digest, created_at, state_backend) \
             VALUES (?, ?, ?, ?, ?, 'abode') ON CONFLICT (build_id) DO UPDATE SET plan = excluded.plan, \
             digest = excluded.digest, state_digest = excluded.state_digest, state_backend = 'abode'"),
        )
        .bind(build_id)
        .bind(&plan.plan)
        .bind(&plan.digest)
        .bind(&plan.state_digest)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error("saved plan"))?;
        sqlx::query(&sql("UPDATE jobs SET status = 'done', finished_at = ? WHERE build_id = ?"))
            .bind(now)
            .bind(build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("job"))?;
        self.insert_notifications(&mut tx, notices).await?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(true)
    }

    pub(crate) async fn confirm_build(
        &self,
        build_id: &str,
        digest: &str,
        confirmer_id: &str,
        audit: &NewAuditEvent,
    ) -> Result<bool, StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let result = sqlx::query(
            &sql("UPDATE builds SET status = 'pending', confirmed_by = ?, confirmed_at = ?, expires_at = NULL \
             WHERE id = ? AND status = 'awaiting_confirmation' AND plan_digest = ?"),
        )
        .bind(confirmer_id)
        .bind(now)
        .bind(build_id)
        .bind(digest)
        .execute(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        if result.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(
            &sql("UPDATE jobs SET status = 'queued', kind = 'apply_saved_plan', worker = NULL, \
             claimed_at = NULL, finished_at = NULL, created_at = ? WHERE build_id = ?"),
        )
        .bind(now)
        .bind(build_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error("job"))?;
        self.insert_audit(&mut tx, audit).await?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(true)
    }

    pub(crate) async fn saved_plan(&self, build_id: &str) -> Result<Option<SavedPlan>, StoreError> {
        sqlx::query_as(&sql("SELECT plan, digest, state_digest FROM saved_plans WHERE build_id = ?"))
            .bind(build_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("saved plan"))
    }

    pub(crate) async fn saved_plan_on_local_state(&self, build_id: &str) -> Result<bool, StoreError> {
        let backend: Option<SavedPlanState> = sqlx::query_scalar(&sql(
            "SELECT state_backend FROM saved_plans WHERE build_id = ?",
        ))
        .bind(build_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error("saved plan"))?;
        Ok(backend == Some(SavedPlanState::Local))
    }

    pub(crate) async fn put_saved_plan(
        &self,
        build_id: &str,
        plan: &SavedPlan,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql(
            "INSERT INTO saved_plans (build_id, plan, digest, state_digest, created_at, state_backend) \
             VALUES (?, ?, ?, ?, ?, 'abode') ON CONFLICT (build_id) DO UPDATE SET plan = excluded.plan, \
             digest = excluded.digest, state_digest = excluded.state_digest, state_backend = 'abode'",
        ))
        .bind(build_id)
        .bind(&plan.plan)
        .bind(&plan.digest)
        .bind(&plan.state_digest)
        .bind(self.now_ms())
        .execute(&self.pool)
        .await
        .map_err(db_error("saved plan"))?;
        Ok(())
    }

    pub(crate) async fn delete_saved_plan(&self, build_id: &str) -> Result<(), StoreError> {
        sqlx::query(&sql("DELETE FROM saved_plans WHERE build_id = ?"))
            .bind(build_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("saved plan"))?;
        Ok(())
    }

    pub(crate) async fn expire_held_builds(
        &self,
        now: i64,
        error: &str,
    ) -> Result<Vec<String>, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let rows = sqlx::query(
            &sql("UPDATE builds SET status = 'canceled', error = ?, finished_at = ? \
             WHERE status = 'awaiting_confirmation' AND expires_at IS NOT NULL AND expires_at <= ? \
             RETURNING id"),
        )
        .bind(error)
        .bind(now)
        .bind(now)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        let ids: Vec<String> = rows
            .iter()
            .map(|row| row.try_get("id").map_err(StoreError::Database))
            .collect::<Result<_, _>>()?;
        for id in &ids {
            sqlx::query(&sql("DELETE FROM saved_plans WHERE build_id = ?"))
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(db_error("saved plan"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(ids)
    }

    pub(crate) async fn held_builds_expiring(
        &self,
        before: i64,
    ) -> Result<Vec<Build>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "{BUILD_SELECT} WHERE b.status = 'awaiting_confirmation' \
             AND b.expires_at IS NOT NULL AND b.expires_at <= ? ORDER BY b.expires_at, b.id"
        )))
        .bind(before)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("build"))
    }

    pub(crate) async fn expire_held_build(
        &self,
        build_id: &str,
        now: i64,
        error: &str,
        notices: &[NewNotification],
    ) -> Result<bool, StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        let result = sqlx::query(
            &sql("UPDATE builds SET status = 'canceled', error = ?, finished_at = ? \
             WHERE id = ? AND status = 'awaiting_confirmation' AND expires_at IS NOT NULL \
             AND expires_at <= ?"),
        )
        .bind(error)
        .bind(now)
        .bind(build_id)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error("build"))?;
        if result.rows_affected() == 0 {
            return Ok(false);
        }
        sqlx::query(&sql("DELETE FROM saved_plans WHERE build_id = ?"))
            .bind(build_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("saved plan"))?;
        self.insert_notifications(&mut tx, notices).await?;
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(true)
    }

    pub(crate) async fn protections(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<Protection>, StoreError> {
        sqlx::query_as(
            &sql("SELECT address, mode, build_id, updated_at, retain_expire, retain_for_secs FROM workspace_protections \
             WHERE workspace_id = ? ORDER BY address"),
        )
        .bind(workspace_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("protection"))
    }

    pub(crate) async fn replace_protections(
        &self,
        workspace_id: &str,
        build_id: &str,
        protections: &[NewProtection],
    ) -> Result<(), StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        sqlx::query(&sql("DELETE FROM workspace_protections WHERE workspace_id = ?"))
            .bind(workspace_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("protection"))?;
        for protection in protections {
            sqlx::query(
                &sql("INSERT INTO workspace_protections (workspace_id, address, mode, build_id, updated_at, \
                 retain_expire, retain_for_secs) VALUES (?, ?, ?, ?, ?, ?, ?)"),
            )
            .bind(workspace_id)
            .bind(&protection.address)
            .bind(&protection.mode)
            .bind(build_id)
            .bind(now)
            .bind(&protection.retain_expire)
            .bind(protection.retain_for_secs)
            .execute(&mut *tx)
            .await
            .map_err(db_error("protection"))?;
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(())
    }

    pub(crate) async fn release_protection(
        &self,
        workspace_id: &str,
        address: &str,
    ) -> Result<Protection, StoreError> {
        sqlx::query_as(
            &sql("DELETE FROM workspace_protections WHERE workspace_id = ? AND address = ? \
             RETURNING address, mode, build_id, updated_at, retain_expire, retain_for_secs"),
        )
        .bind(workspace_id)
        .bind(address)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("protection"))
        .and_then(|rows| crate::error::returned_row(rows, "protection"))
    }
    };
}

pub(crate) use held_queries;
