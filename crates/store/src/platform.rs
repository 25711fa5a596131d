//! Counts of the whole platform for the metrics refresher: held builds, the
//! job queue and agents by status, in one query, so that a refresh costs the
//! same for 10 workspaces as for 10,000 and a scrape never queries.

/// What [`crate::Store::platform_counts`] counted. Agents are those of
/// running workspaces (whose newest finished build is a succeeded start),
/// judged as a workspace view judges them (`abode_control::workspace_status`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlatformCounts {
    /// Builds awaiting confirmation.
    pub builds_held: i64,
    /// Jobs queued and not yet claimed.
    pub jobs_pending: i64,
    /// When the oldest queued job was queued (Unix ms), if any is.
    pub oldest_pending_job_at: Option<i64>,
    /// Agents by status (only statuses some agent is in): `connecting`,
    /// `unhealthy`, `disconnected`, `starting`, `ready`, `start_error`.
    pub agents: Vec<(String, i64)>,
    /// Notifications not yet delivered (pending or being delivered).
    pub notifications_pending: i64,
}

/// The moments that tell agents' statuses apart; the policy (how long an
/// agent gets) is the caller's, the store only compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentCutoffs {
    /// An agent that never sent a heartbeat is `unhealthy` when the build
    /// that started its workspace finished before this (Unix ms), else
    /// `connecting`.
    pub connect_before: i64,
    /// An agent whose last heartbeat is before this is `disconnected`.
    pub heartbeat_before: i64,
}

/// The platform query of [`crate::Store`]; expanded inside each backend's
/// `impl`.
macro_rules! platform_queries {
    () => {
    pub(crate) async fn platform_counts(
        &self,
        cutoffs: AgentCutoffs,
    ) -> Result<PlatformCounts, StoreError> {
        let rows: Vec<(String, String, i64, Option<i64>)> = sqlx::query_as(&sql(
            "SELECT 'held' AS kind, '' AS name, COUNT(*) AS count, CAST(NULL AS BIGINT) AS oldest \
             FROM builds WHERE status = 'awaiting_confirmation' \
             UNION ALL \
             SELECT 'jobs', '', COUNT(*), MIN(created_at) FROM jobs WHERE status = 'queued' \
             UNION ALL \
             SELECT 'notifications', '', COUNT(*), CAST(NULL AS BIGINT) FROM notifications \
             WHERE status IN ('pending', 'delivering') \
             UNION ALL \
             SELECT 'agent', CASE \
                 WHEN a.last_heartbeat_at IS NULL AND s.finished_at < ?1 THEN 'unhealthy' \
                 WHEN a.last_heartbeat_at IS NULL THEN 'connecting' \
                 WHEN a.last_heartbeat_at < ?2 THEN 'disconnected' \
                 WHEN a.lifecycle = 'ready' THEN 'ready' \
                 WHEN a.lifecycle = 'start_error' THEN 'start_error' \
                 ELSE 'starting' END, COUNT(*), CAST(NULL AS BIGINT) \
             FROM agents a JOIN builds s ON s.id = ( \
                 SELECT b.id FROM builds b \
                 WHERE b.workspace_id = a.workspace_id AND b.finished_at IS NOT NULL \
                 ORDER BY b.number DESC LIMIT 1) \
             WHERE s.status = 'succeeded' AND s.transition = 'start' \
             GROUP BY 2",
        ))
        .bind(cutoffs.connect_before)
        .bind(cutoffs.heartbeat_before)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("platform counts"))?;
        let mut counts = PlatformCounts::default();
        for (kind, name, count, oldest) in rows {
            match kind.as_str() {
                "held" => counts.builds_held = count,
                "notifications" => counts.notifications_pending = count,
                "jobs" => {
                    counts.jobs_pending = count;
                    counts.oldest_pending_job_at = oldest;
                }
                _ => counts.agents.push((name, count)),
            }
        }
        counts.agents.sort();
        Ok(counts)
    }
    };
}

pub(crate) use platform_queries;
