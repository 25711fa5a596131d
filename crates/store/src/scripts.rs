//! The agents' `abode_script`s (issue 48, item 1): their definitions are
//! kept with the agent (`agents.scripts`, put by `put_agents`); here is the
//! latest run of each, as the agent reports it, with the end of its output.

from_row! {
    /// The latest run of one script of one agent.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ScriptRunRow {
        pub agent_name: String,
        pub display_name: String,
        /// running, succeeded, failed, timed_out or not_run.
        pub state: String,
        pub exit_status: Option<i64>,
        pub started_at: i64,
        pub ended_at: Option<i64>,
        pub runs: i64,
    }
}

/// A report of a run, as the agent makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptRunReport<'a> {
    pub workspace_id: &'a str,
    pub agent_name: &'a str,
    pub display_name: &'a str,
    pub state: &'a str,
    pub exit_status: Option<i64>,
    /// The agent's count of this script's runs: a new count is a new run.
    pub run: i64,
    pub log: &'a str,
}

/// The script methods of [`crate::Store`]; expanded inside each backend's
/// `impl`.
macro_rules! script_queries {
    () => {
        pub(crate) async fn agent_scripts(
            &self,
            agent_id: &str,
        ) -> Result<Option<String>, StoreError> {
            let scripts: Option<Option<String>> =
                sqlx::query_scalar(&sql("SELECT scripts FROM agents WHERE id = ?"))
                    .bind(agent_id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error("agent"))?;
            Ok(scripts.flatten())
        }

        pub(crate) async fn agent_watch(
            &self,
            agent_id: &str,
        ) -> Result<Option<String>, StoreError> {
            let watch: Option<Option<String>> =
                sqlx::query_scalar(&sql("SELECT watch FROM agents WHERE id = ?"))
                    .bind(agent_id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error("agent"))?;
            Ok(watch.flatten())
        }

        pub(crate) async fn workspace_agent_watches(
            &self,
            workspace_id: &str,
        ) -> Result<Vec<(String, String)>, StoreError> {
            sqlx::query_as(&sql(
                "SELECT name, watch FROM agents WHERE workspace_id = ? \
                 AND watch IS NOT NULL ORDER BY name",
            ))
            .bind(workspace_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("agent"))
        }

        pub(crate) async fn workspace_agent_scripts(
            &self,
            workspace_id: &str,
        ) -> Result<Vec<(String, String)>, StoreError> {
            sqlx::query_as(&sql(
                "SELECT name, scripts FROM agents WHERE workspace_id = ? \
                 AND scripts IS NOT NULL ORDER BY name",
            ))
            .bind(workspace_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("agent"))
        }

        pub(crate) async fn put_script_run(
            &self,
            report: &crate::scripts::ScriptRunReport<'_>,
        ) -> Result<(), StoreError> {
            let now = self.now_ms();
            let ended_at = (report.state != "running").then_some(now);
            sqlx::query(&sql(
                "INSERT INTO agent_script_runs (workspace_id, agent_name, display_name, state, \
                 exit_status, started_at, ended_at, runs, log) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (workspace_id, agent_name, display_name) DO UPDATE SET \
                 state = excluded.state, exit_status = excluded.exit_status, \
                 ended_at = excluded.ended_at, log = excluded.log, \
                 started_at = CASE WHEN agent_script_runs.runs = excluded.runs \
                 THEN agent_script_runs.started_at ELSE excluded.started_at END, \
                 runs = excluded.runs",
            ))
            .bind(report.workspace_id)
            .bind(report.agent_name)
            .bind(report.display_name)
            .bind(report.state)
            .bind(report.exit_status)
            .bind(now)
            .bind(ended_at)
            .bind(report.run)
            .bind(report.log)
            .execute(&self.pool)
            .await
            .map_err(db_error("script run"))?;
            Ok(())
        }

        pub(crate) async fn script_runs(
            &self,
            workspace_id: &str,
        ) -> Result<Vec<crate::scripts::ScriptRunRow>, StoreError> {
            sqlx::query_as(&sql(
                "SELECT agent_name, display_name, state, exit_status, started_at, ended_at, runs \
                 FROM agent_script_runs WHERE workspace_id = ? ORDER BY agent_name, display_name",
            ))
            .bind(workspace_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("script run"))
        }

        pub(crate) async fn script_run_log(
            &self,
            workspace_id: &str,
            agent_name: &str,
            display_name: &str,
        ) -> Result<Option<String>, StoreError> {
            sqlx::query_scalar(&sql(
                "SELECT log FROM agent_script_runs WHERE workspace_id = ? AND agent_name = ? \
                 AND display_name = ?",
            ))
            .bind(workspace_id)
            .bind(agent_name)
            .bind(display_name)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error("script run"))
        }
    };
}
pub(crate) use script_queries;
