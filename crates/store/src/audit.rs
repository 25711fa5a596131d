//! The audit log: recording events (also inside another write's
//! transaction, `insert_audit`) and its page, newest first (oldest first
//! for an export), with filters.

/// The audit methods of [`crate::Store`]; expanded inside each backend's
/// `impl` with its database type.
macro_rules! audit_queries {
    ($db:ty) => {
    pub(crate) async fn record_audit(&self, event: &NewAuditEvent) -> Result<(), StoreError> {
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        self.insert_audit(&mut tx, event).await?;
        tx.commit().await.map_err(StoreError::Database)
    }

    /// Completes the events a request recorded with how it came and how it
    /// ended: the client's address and user agent, and the HTTP status.
    pub(crate) async fn complete_audit(
        &self,
        request_id: &str,
        client_ip: Option<&str>,
        user_agent: Option<&str>,
        status_code: i64,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query(&sql(
            "UPDATE audit_events SET client_ip = ?, user_agent = ?, status_code = ? \
             WHERE request_id = ? AND status_code IS NULL",
        ))
        .bind(client_ip)
        .bind(user_agent)
        .bind(status_code)
        .bind(request_id)
        .execute(&self.pool)
        .await
        .map_err(db_error("audit event"))?;
        Ok(done.rows_affected())
    }

    pub(crate) async fn list_audit(
        &self,
        filter: &AuditFilter,
    ) -> Result<Page<AuditEvent>, StoreError> {
        let before = filter
            .after
            .as_deref()
            .map(|cursor| decode_cursor(AUDIT_CURSOR, cursor, 1).and_then(|key| parse_i64(&key[0])))
            .transpose()?;
        let (beyond, order) = if filter.oldest_first { (">", "ASC") } else { ("<", "DESC") };
        let rows: Vec<AuditEvent> = sqlx::query_as(
            &sql(&format!("SELECT e.id, e.time, e.actor_id, e.actor_name, e.action, e.target_type, \
             COALESCE(ou.username || '/' || w.name, e.target) AS target, e.outcome, \
             e.request_id, e.details, e.workspace_id, e.client_ip, e.user_agent, \
             e.status_code FROM audit_events e \
             LEFT JOIN workspaces w ON w.id = e.workspace_id \
             LEFT JOIN users ou ON ou.id = w.owner_id \
             WHERE (?1 IS NULL OR e.workspace_id = ?1) \
             AND (?2 IS NULL OR w.owner_id = ?2 \
                  OR (e.target_type != 'workspace' AND e.actor_id = ?3)) \
             AND (?4 IS NULL OR e.target = ?4 OR ou.username || '/' || w.name = ?4) \
             AND (?5 IS NULL OR e.actor_name = ?5) \
             AND (?6 IS NULL OR e.action = ?6) AND (?7 IS NULL OR e.time >= ?7) \
             AND (?8 IS NULL OR e.time < ?8) AND (?9 IS NULL OR e.id {beyond} ?9) \
             ORDER BY e.id {order} LIMIT ?10")),
        )
        .bind(&filter.workspace_id)
        .bind(&filter.visible_to)
        .bind(&filter.visible_to)
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
             outcome, request_id, details, workspace_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
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
        .bind(&event.workspace_id)
        .execute(&mut **tx)
        .await
        .map_err(db_error("audit event"))?;
        Ok(())
    }
    };
}

pub(crate) use audit_queries;
