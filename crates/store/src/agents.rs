//! Agents of workspaces: replacing them after a start build (keeping what a
//! kept agent reported), finding them by workspace or token, heartbeats and
//! lifecycle reports.

pub(crate) const AGENT_COLUMNS: &str =
    "id, workspace_id, build_id, name, lifecycle, connected_at, last_heartbeat_at, created_at, \
     startup_script, dir, env, exit_status";

from_row! {
    /// What an agent reported, carried over when a start build keeps the agent.
    pub(crate) struct AgentConnection {
        pub(crate) token_hash: String,
        pub(crate) lifecycle: Option<String>,
        pub(crate) connected_at: Option<i64>,
        pub(crate) last_heartbeat_at: Option<i64>,
        pub(crate) exit_status: Option<i64>,
    }
}

/// An agent's scripts as kept (a JSON list), NULL when it has none.
pub(crate) fn scripts_json(scripts: &[abode_contract::script::ScriptDefinition]) -> Option<String> {
    // Serializing strings, numbers and flags cannot fail.
    (!scripts.is_empty()).then(|| serde_json::to_string(scripts).unwrap_or_default())
}

/// The longest timeout of an agent's stop scripts, NULL when it has none.
pub(crate) fn stop_timeout_seconds(
    scripts: &[abode_contract::script::ScriptDefinition],
) -> Option<i64> {
    scripts
        .iter()
        .filter(|script| script.run_on_stop)
        .map(|script| {
            script
                .timeout_seconds
                .unwrap_or(abode_contract::script::DEFAULT_STOP_TIMEOUT_SECONDS)
        })
        .max()
}

from_row! {
    /// An agent's tunnel held by some server, as recorded for the others.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AgentTunnelRow {
        pub token_hash: String,
        pub agent_name: String,
        pub server_id: String,
        pub relay_url: String,
    }
}

from_row! {
    /// A stored app, decoded once into [`WorkspaceApp`].
    pub(crate) struct AppRow {
        id: String,
        workspace_id: String,
        agent_id: String,
        agent_name: String,
        definition: String,
        health: String,
        health_changed_at: Option<i64>,
    }
}

impl AppRow {
    pub(crate) fn decode(self) -> Result<crate::WorkspaceApp, crate::StoreError> {
        let corrupt = |what: &'static str, reason: String| crate::Corrupt {
            what,
            of: format!("app {}", self.id),
            reason,
        };
        let definition = serde_json::from_str(&self.definition)
            .map_err(|error| corrupt("definition", error.to_string()))?;
        let health = abode_contract::apps::AppHealth::parse(&self.health)
            .ok_or_else(|| corrupt("health", format!("unknown health `{}`", self.health)))?;
        Ok(crate::WorkspaceApp {
            id: self.id,
            workspace_id: self.workspace_id,
            agent_id: self.agent_id,
            agent_name: self.agent_name,
            definition,
            health,
            health_changed_at: self.health_changed_at,
        })
    }
}

macro_rules! agent_queries {
    () => {
    pub(crate) async fn replace_agents(
        &self,
        workspace_id: &str,
        build_id: &str,
        agents: &[NewAgent],
    ) -> Result<(), StoreError> {
        let now = self.now_ms();
        let mut tx = self.pool.begin_with(BEGIN_WRITE).await.map_err(StoreError::Database)?;
        // An agent the build kept (same token: updated in place, its process
        // still running) keeps what it reported; it does not start again.
        let kept: Vec<AgentConnection> = sqlx::query_as(&sql(
            "SELECT token_hash, lifecycle, connected_at, last_heartbeat_at, exit_status \
             FROM agents WHERE workspace_id = ?",
        ))
        .bind(workspace_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error("agent"))?;
        // An app a kept agent still serves keeps its health.
        let health: Vec<(String, String, String, Option<i64>)> = sqlx::query_as(&sql(
            "SELECT agent_name, slug, health, health_changed_at FROM workspace_apps WHERE workspace_id = ?",
        ))
        .bind(workspace_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error("app"))?;
        sqlx::query(&sql("DELETE FROM workspace_apps WHERE workspace_id = ?"))
            .bind(workspace_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("app"))?;
        sqlx::query(&sql("DELETE FROM agents WHERE workspace_id = ?"))
            .bind(workspace_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error("agent"))?;
        for agent in agents {
            let before = kept.iter().find(|old| old.token_hash == agent.token_hash);
            let agent_id = new_id();
            for app in &agent.apps {
                // Serializing plain strings, numbers and enums cannot fail.
                let definition = serde_json::to_string(app).unwrap_or_default();
                let (reported, changed_at) = match before.and(
                    health
                        .iter()
                        .find(|(name, slug, _, _)| *name == agent.name && *slug == app.slug),
                ) {
                    Some((_, _, reported, changed_at)) if app.healthcheck.is_some() => {
                        (reported.clone(), *changed_at)
                    }
                    _ => (app.initial_health().as_str().to_string(), None),
                };
                sqlx::query(&sql(
                    "INSERT INTO workspace_apps (id, workspace_id, agent_id, agent_name, slug, \
                     definition, health, health_changed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                ))
                .bind(new_id())
                .bind(workspace_id)
                .bind(&agent_id)
                .bind(&agent.name)
                .bind(&app.slug)
                .bind(definition)
                .bind(reported)
                .bind(changed_at)
                .execute(&mut *tx)
                .await
                .map_err(db_error("app"))?;
            }
            sqlx::query(
                &sql("INSERT INTO agents (id, workspace_id, build_id, name, token_hash, created_at, \
                 startup_script, dir, env, lifecycle, connected_at, last_heartbeat_at, exit_status, \
                 claim_script, shutdown_script, shutdown_timeout_seconds, disk_warning_percents, \
                 scripts, stop_timeout_seconds, watch) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
            )
            .bind(&agent_id)
            .bind(workspace_id)
            .bind(build_id)
            .bind(&agent.name)
            .bind(&agent.token_hash)
            .bind(now)
            .bind(&agent.startup_script)
            .bind(&agent.dir)
            .bind(&agent.env)
            .bind(before.and_then(|old| old.lifecycle.clone()))
            .bind(before.and_then(|old| old.connected_at))
            .bind(before.and_then(|old| old.last_heartbeat_at))
            .bind(before.and_then(|old| old.exit_status))
            .bind(&agent.claim_script)
            .bind(&agent.settings.shutdown_script)
            .bind(agent.settings.shutdown_timeout_seconds)
            .bind(
                agent
                    .settings
                    .disk_warning_percents
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            )
            .bind(scripts_json(&agent.settings.scripts))
            .bind(stop_timeout_seconds(&agent.settings.scripts))
            .bind(
                (!agent.settings.watch.is_empty())
                    .then(|| serde_json::to_string(&agent.settings.watch).unwrap_or_default()),
            )
            .execute(&mut *tx)
            .await
            .map_err(db_error("agent token"))?;
        }
        // A script's latest run stays with an agent that stays (its token
        // kept); a new or gone agent's runs are forgotten.
        let ran: Vec<String> = sqlx::query_scalar(&sql(
            "SELECT DISTINCT agent_name FROM agent_script_runs WHERE workspace_id = ?",
        ))
        .bind(workspace_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error("script run"))?;
        for agent_name in ran {
            let stays = agents.iter().any(|agent| {
                agent.name == agent_name
                    && kept.iter().any(|old| old.token_hash == agent.token_hash)
            });
            if !stays {
                sqlx::query(&sql(
                    "DELETE FROM agent_script_runs WHERE workspace_id = ? AND agent_name = ?",
                ))
                .bind(workspace_id)
                .bind(&agent_name)
                .execute(&mut *tx)
                .await
                .map_err(db_error("script run"))?;
            }
        }
        tx.commit().await.map_err(StoreError::Database)?;
        Ok(())
    }

    pub(crate) async fn apps_of_workspace(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<WorkspaceApp>, StoreError> {
        let rows: Vec<AppRow> = sqlx::query_as(&sql(
            "SELECT id, workspace_id, agent_id, agent_name, definition, health, health_changed_at \
             FROM workspace_apps WHERE workspace_id = ? ORDER BY agent_name, slug",
        ))
        .bind(workspace_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("app"))?;
        rows.into_iter().map(AppRow::decode).collect()
    }

    pub(crate) async fn set_app_health(
        &self,
        agent_id: &str,
        slug: &str,
        health: abode_contract::apps::AppHealth,
    ) -> Result<bool, StoreError> {
        let changed = sqlx::query(&sql(
            "UPDATE workspace_apps SET health = ?, health_changed_at = ? \
             WHERE agent_id = ? AND slug = ? AND health <> ?",
        ))
        .bind(health.as_str())
        .bind(self.now_ms())
        .bind(agent_id)
        .bind(slug)
        .bind(health.as_str())
        .execute(&self.pool)
        .await
        .map_err(db_error("app"))?;
        Ok(changed.rows_affected() > 0)
    }

    pub(crate) async fn agents_of_workspace(
        &self,
        workspace_id: &str,
    ) -> Result<Vec<Agent>, StoreError> {
        sqlx::query_as(&sql(&format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE workspace_id = ? ORDER BY name"
        )))
        .bind(workspace_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("agent"))
    }

    pub(crate) async fn agent_by_token_hash(&self, token_hash: &str) -> Result<Agent, StoreError> {
        sqlx::query_as(&sql(&format!(
            "SELECT {AGENT_COLUMNS} FROM agents WHERE token_hash = ?"
        )))
        .bind(token_hash)
        .fetch_one(&self.pool)
        .await
        .map_err(db_error("agent"))
    }

    pub(crate) async fn put_agent_tunnel(
        &self,
        token_hash: &str,
        workspace_id: &str,
        agent_name: &str,
        server_id: &str,
        relay_url: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql(
            "INSERT INTO agent_tunnels (token_hash, workspace_id, agent_name, server_id, relay_url, connected_at) \
             VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (token_hash) DO UPDATE SET \
             workspace_id = excluded.workspace_id, agent_name = excluded.agent_name, \
             server_id = excluded.server_id, relay_url = excluded.relay_url, \
             connected_at = excluded.connected_at",
        ))
        .bind(token_hash)
        .bind(workspace_id)
        .bind(agent_name)
        .bind(server_id)
        .bind(relay_url)
        .bind(self.now_ms())
        .execute(&self.pool)
        .await
        .map_err(db_error("agent tunnel"))?;
        Ok(())
    }

    pub(crate) async fn delete_agent_tunnel(
        &self,
        token_hash: &str,
        server_id: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(&sql("DELETE FROM agent_tunnels WHERE token_hash = ? AND server_id = ?"))
            .bind(token_hash)
            .bind(server_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("agent tunnel"))?;
        Ok(())
    }

    pub(crate) async fn forget_agent_tunnels(&self, server_id: &str) -> Result<(), StoreError> {
        sqlx::query(&sql("DELETE FROM agent_tunnels WHERE server_id = ?"))
            .bind(server_id)
            .execute(&self.pool)
            .await
            .map_err(db_error("agent tunnel"))?;
        Ok(())
    }

    pub(crate) async fn remote_agent_tunnels(
        &self,
        workspace_id: &str,
        server_id: &str,
    ) -> Result<Vec<AgentTunnelRow>, StoreError> {
        sqlx::query_as(&sql(
            "SELECT token_hash, agent_name, server_id, relay_url FROM agent_tunnels \
             WHERE workspace_id = ? AND server_id <> ? ORDER BY agent_name, connected_at DESC",
        ))
        .bind(workspace_id)
        .bind(server_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error("agent tunnel"))
    }

    pub(crate) async fn agent_claim_script(&self, agent_id: &str) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar(&sql("SELECT claim_script FROM agents WHERE id = ?"))
            .bind(agent_id)
            .fetch_one(&self.pool)
            .await
            .map_err(db_error("agent"))
    }

    pub(crate) async fn agent_heartbeat(
        &self,
        agent_id: &str,
        lifecycle: Option<AgentLifecycle>,
    ) -> Result<(), StoreError> {
        let now = self.now_ms();
        sqlx::query(
            &sql("UPDATE agents SET lifecycle = COALESCE(?, lifecycle), \
             connected_at = COALESCE(connected_at, ?), last_heartbeat_at = ? WHERE id = ?"),
        )
        .bind(lifecycle.map(AgentLifecycle::as_str))
        .bind(now)
        .bind(now)
        .bind(agent_id)
        .execute(&self.pool)
        .await
        .map_err(db_error("agent"))?;
        Ok(())
    }

    pub(crate) async fn agent_lifecycle(
        &self,
        agent_id: &str,
        lifecycle: AgentLifecycle,
        exit_status: Option<i64>,
    ) -> Result<(), StoreError> {
        let now = self.now_ms();
        sqlx::query(
            &sql("UPDATE agents SET lifecycle = ?, exit_status = ?, \
             connected_at = COALESCE(connected_at, ?), last_heartbeat_at = ? WHERE id = ?"),
        )
        .bind(lifecycle.as_str())
        .bind(exit_status)
        .bind(now)
        .bind(now)
        .bind(agent_id)
        .execute(&self.pool)
        .await
        .map_err(db_error("agent"))?;
        Ok(())
    }
    };
}

pub(crate) use agent_queries;
