//! The audit log: recording events (also inside another write's
//! transaction, `insert_audit`) and its page, newest first, with filters.

/// The audit methods of [`crate::Store`]; expanded inside each backend's
/// `impl` with its database type.
macro_rules! audit_queries {
    ($db:ty) => {
    pub(crate) async fn record_audit(&self, event: &NewAuditEvent) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        self.insert_audit(&mut tx, event).await?;
        tx.commit().await.map_err(StoreError::Database)
    }

    pub(crate) async fn list_audit(
        &self,
        filter: &AuditFilter,
    ) -> Result<Page<AuditEvent>, StoreError> {
        let (prefix, actor) = match &filter.visible_to {
            Some((prefix, actor)) => (Some(format!("{prefix}%")), Some(actor.clone())),
            None => (None, None),
        };
        let before = filter
            .after
            .as_deref()
            .map(|cursor| decode_cursor(AUDIT_CURSOR, cursor, 1).and_then(|key| parse_i64(&key[0])))
            .transpose()?;
        let rows: Vec<AuditEvent> = sqlx::query_as(
            &sql("SELECT id, time, actor_id, actor_name, action, target_type, target, outcome, \
             request_id, details FROM audit_events \
             WHERE (?1 IS NULL OR (target_type = 'workspace' AND target = ?1)) \
             AND (?2 IS NULL OR (target_type = 'workspace' AND target LIKE ?2) \
                  OR (target_type != 'workspace' AND actor_id = ?3)) \
             AND (?4 IS NULL OR target = ?4) AND (?5 IS NULL OR actor_name = ?5) \
             AND (?6 IS NULL OR action = ?6) AND (?7 IS NULL OR time >= ?7) \
             AND (?8 IS NULL OR time < ?8) AND (?9 IS NULL OR id < ?9) \
             ORDER BY id DESC LIMIT ?10"),
        )
        .bind(&filter.target)
        .bind(prefix)
        .bind(actor)
        .bind(&filter.any_target)
        .bind(&filter.actor)
        .bind(&filter.action)
        .bind(filter.since)
        .bind(filter.until)
        .bind(before)
        .bind(filter.limit + 1)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("audit event"))?;
        Ok(paged(rows, filter.limit, |event| {
            encode_cursor(AUDIT_CURSOR, &[&event.id.to_string()])
        }))
    }

    /// Inserts an audit event inside the caller's transaction.
    async fn insert_audit(
        &self,
        tx: &mut sqlx::Transaction<'_, $db>,
        event: &NewAuditEvent,
    ) -> Result<(), StoreError> {
        sqlx::query(
            &sql("INSERT INTO audit_events (time, actor_id, actor_name, action, target_type, target, \
             outcome, request_id, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        )
        .bind(self.now_ms())
        .bind(&event.actor_id)
        .bind(&event.actor_name)
        .bind(&event.action)
        .bind(&event.target_type)
        .bind(&event.target)
        .bind(&event.outcome)
        .bind(&event.request_id)
        .bind(&event.details)
        .execute(&mut **tx)
        .await
        .map_err(db_error("audit event"))?;
        Ok(())
    }
    };
}

pub(crate) use audit_queries;
