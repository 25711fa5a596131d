//! Stop scripts and disk-full warnings (issue 47, parts 4 and 5): the
//! shutdowns a stop, restart or delete asked of a workspace's agents, and
//! what the agents last said of their home volume, with when each
//! threshold was last told.

from_row! {
    /// An agent of a workspace that has a shutdown script or stop scripts
    /// (`abode_script` with `run_on_stop`).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ShutdownTarget {
        pub agent_id: String,
        pub agent_name: String,
        /// Empty when the agent has stop scripts only.
        pub script: String,
        pub timeout_seconds: Option<i64>,
        /// The longest timeout of its stop scripts, if it has any.
        pub stop_timeout_seconds: Option<i64>,
        pub last_heartbeat_at: Option<i64>,
    }
}

/// A build's request that an agent run its shutdown script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAgentShutdown {
    pub build_id: String,
    pub workspace_id: String,
    pub agent_id: String,
    pub agent_name: String,
    pub script: String,
    pub timeout_seconds: i64,
    /// When the build stops waiting (Unix ms, the server's clock).
    pub deadline: i64,
    /// Already ended when asked (`not_connected`): nothing is asked of the
    /// agent.
    pub outcome: Option<String>,
}

from_row! {
    /// A build's shutdown of one agent, as it stands.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AgentShutdownRow {
        pub build_id: String,
        pub agent_id: String,
        pub agent_name: String,
        pub script: String,
        pub timeout_seconds: i64,
        pub requested_at: i64,
        pub deadline: i64,
        pub ended_at: Option<i64>,
        pub outcome: Option<String>,
        pub exit_status: Option<i64>,
        pub output: Option<String>,
    }
}

from_row! {
    /// What an agent last said of its home volume.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AgentDiskRow {
        pub agent_name: String,
        pub used_bytes: i64,
        pub total_bytes: i64,
        /// None for a report from before it was kept.
        pub available_bytes: Option<i64>,
        pub reported_at: i64,
    }
}

pub(crate) const SHUTDOWN_COLUMNS: &str =
    "build_id, agent_id, agent_name, script, timeout_seconds, \
     requested_at, deadline, ended_at, outcome, exit_status, output";

/// The shutdown and disk methods of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! shutdown_queries {
    () => {
        pub(crate) async fn agents_to_shut_down(
            &self,
            workspace_id: &str,
        ) -> Result<Vec<crate::shutdowns::ShutdownTarget>, StoreError> {
            sqlx::query_as(&sql(
                "SELECT id AS agent_id, name AS agent_name, \
                 COALESCE(shutdown_script, '') AS script, \
                 shutdown_timeout_seconds AS timeout_seconds, stop_timeout_seconds, \
                 last_heartbeat_at FROM agents WHERE workspace_id = ? \
                 AND ((shutdown_script IS NOT NULL AND shutdown_script <> '') \
                 OR stop_timeout_seconds IS NOT NULL) ORDER BY name",
            ))
            .bind(workspace_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("agent"))
        }

        pub(crate) async fn insert_agent_shutdown(
            &self,
            shutdown: &crate::shutdowns::NewAgentShutdown,
        ) -> Result<bool, StoreError> {
            let now = self.now_ms();
            let ended_at = shutdown.outcome.as_ref().map(|_| now);
            let done = sqlx::query(&sql(
                "INSERT INTO agent_shutdowns (build_id, agent_id, agent_name, workspace_id, script, \
                 timeout_seconds, requested_at, deadline, ended_at, outcome) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (build_id, agent_id) DO NOTHING",
            ))
            .bind(&shutdown.build_id)
            .bind(&shutdown.agent_id)
            .bind(&shutdown.agent_name)
            .bind(&shutdown.workspace_id)
            .bind(&shutdown.script)
            .bind(shutdown.timeout_seconds)
            .bind(now)
            .bind(shutdown.deadline)
            .bind(ended_at)
            .bind(&shutdown.outcome)
            .execute(&self.pool)
            .await
            .map_err(db_error("agent shutdown"))?;
            Ok(done.rows_affected() == 1)
        }

        pub(crate) async fn agent_shutdowns(
            &self,
            build_id: &str,
        ) -> Result<Vec<crate::shutdowns::AgentShutdownRow>, StoreError> {
            sqlx::query_as(&sql(&format!(
                "SELECT {} FROM agent_shutdowns WHERE build_id = ? ORDER BY agent_name",
                crate::shutdowns::SHUTDOWN_COLUMNS
            )))
            .bind(build_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("agent shutdown"))
        }

        pub(crate) async fn pending_agent_shutdown(
            &self,
            agent_id: &str,
        ) -> Result<Option<crate::shutdowns::AgentShutdownRow>, StoreError> {
            sqlx::query_as(&sql(&format!(
                "SELECT {} FROM agent_shutdowns WHERE agent_id = ? AND ended_at IS NULL \
                 ORDER BY requested_at LIMIT 1",
                crate::shutdowns::SHUTDOWN_COLUMNS
            )))
            .bind(agent_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("agent shutdown"))
        }

        pub(crate) async fn end_agent_shutdown(
            &self,
            build_id: &str,
            agent_id: &str,
            outcome: &str,
            exit_status: Option<i64>,
            output: Option<&str>,
        ) -> Result<bool, StoreError> {
            let done = sqlx::query(&sql(
                "UPDATE agent_shutdowns SET ended_at = ?, outcome = ?, exit_status = ?, output = ? \
                 WHERE build_id = ? AND agent_id = ? AND ended_at IS NULL",
            ))
            .bind(self.now_ms())
            .bind(outcome)
            .bind(exit_status)
            .bind(output)
            .bind(build_id)
            .bind(agent_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("agent shutdown"))?;
            Ok(done.rows_affected() == 1)
        }

        pub(crate) async fn mark_agent_shutdown_logged(
            &self,
            build_id: &str,
            agent_id: &str,
        ) -> Result<bool, StoreError> {
            let done = sqlx::query(&sql(
                "UPDATE agent_shutdowns SET logged = 1 \
                 WHERE build_id = ? AND agent_id = ? AND ended_at IS NOT NULL AND logged = 0",
            ))
            .bind(build_id)
            .bind(agent_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("agent shutdown"))?;
            Ok(done.rows_affected() == 1)
        }

        pub(crate) async fn put_agent_disk(
            &self,
            agent_id: &str,
            used_bytes: i64,
            total_bytes: i64,
            available_bytes: i64,
        ) -> Result<Option<String>, StoreError> {
            sqlx::query(&sql(
                "UPDATE agents SET disk_used_bytes = ?, disk_total_bytes = ?, \
                 disk_available_bytes = ?, disk_reported_at = ? WHERE id = ?",
            ))
            .bind(used_bytes)
            .bind(total_bytes)
            .bind(available_bytes)
            .bind(self.now_ms())
            .bind(agent_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("agent"))?;
            let percents: Option<Option<String>> = sqlx::query_scalar(&sql(
                "SELECT disk_warning_percents FROM agents WHERE id = ?",
            ))
            .bind(agent_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("agent"))?;
            Ok(percents.flatten())
        }

        pub(crate) async fn workspace_disks(
            &self,
            workspace_id: &str,
        ) -> Result<Vec<crate::shutdowns::AgentDiskRow>, StoreError> {
            sqlx::query_as(&sql(
                "SELECT name AS agent_name, disk_used_bytes AS used_bytes, \
                 disk_total_bytes AS total_bytes, disk_available_bytes AS available_bytes, \
                 disk_reported_at AS reported_at FROM agents \
                 WHERE workspace_id = ? AND disk_reported_at IS NOT NULL \
                 AND disk_used_bytes IS NOT NULL AND disk_total_bytes IS NOT NULL ORDER BY name",
            ))
            .bind(workspace_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("agent"))
        }

        pub(crate) async fn claim_disk_warning(
            &self,
            workspace_id: &str,
            percent: i64,
            quiet_ms: i64,
        ) -> Result<bool, StoreError> {
            let now = self.now_ms();
            // One statement: two servers hearing two heartbeats at once
            // tell it once.
            let done = sqlx::query(&sql(
                "INSERT INTO workspace_disk_warnings (workspace_id, percent, notified_at) \
                 VALUES (?, ?, ?) ON CONFLICT (workspace_id, percent) DO UPDATE \
                 SET notified_at = excluded.notified_at \
                 WHERE workspace_disk_warnings.notified_at <= ?",
            ))
            .bind(workspace_id)
            .bind(percent)
            .bind(now)
            .bind(now - quiet_ms)
            .execute(&self.pool)
            .await
            .map_err(db_error("disk warning"))?;
            Ok(done.rows_affected() == 1)
        }
    };
}
pub(crate) use shutdown_queries;
