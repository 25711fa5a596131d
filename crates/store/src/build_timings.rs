//! Build timings (issue 50): each stage a build's runs passed, and each
//! Terraform resource's plan and apply, in Unix microseconds on the
//! server's clock. A run's stages are written when the server hears them
//! (a run handed out again replaces its own); an agent's (`agent_connected`,
//! `scripts`, `ready`) when the agent reports its lifecycle, once each.

from_row! {
    /// A stage of a build's run, ended or under way.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct StageTiming {
        /// `build`, `apply_saved_plan` or `agent:NAME`.
        pub job: String,
        pub stage: String,
        pub started_us: i64,
        /// None while under way.
        pub ended_us: Option<i64>,
    }
}

from_row! {
    /// A Terraform resource's time in a run's plan or apply.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ResourceTiming {
        pub job: String,
        /// `plan` or `apply`.
        pub phase: String,
        pub address: String,
        pub action: String,
        pub started_us: i64,
        pub ended_us: i64,
    }
}

/// Everything recorded of a build's time, ordered by start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildTimings {
    pub stages: Vec<StageTiming>,
    pub resources: Vec<ResourceTiming>,
}

/// The build timings' methods of [`crate::Store`]; expanded inside each
/// backend's `impl`.
macro_rules! build_timing_queries {
    () => {
        pub(crate) async fn put_timings(
            &self,
            build_id: &str,
            stages: &[crate::build_timings::StageTiming],
            resources: &[crate::build_timings::ResourceTiming],
        ) -> Result<(), StoreError> {
            let mut tx = self.pool.begin().await.map_err(db_error("build timing"))?;
            for stage in stages {
                sqlx::query(&sql(
                    "INSERT INTO build_stage_timings (build_id, job, stage, started_us, ended_us) \
                     VALUES (?, ?, ?, ?, ?) ON CONFLICT (build_id, job, stage) DO UPDATE SET \
                     started_us = excluded.started_us, ended_us = excluded.ended_us",
                ))
                .bind(build_id)
                .bind(&stage.job)
                .bind(&stage.stage)
                .bind(stage.started_us)
                .bind(stage.ended_us)
                .execute(&mut *tx)
                .await
                .map_err(db_error("build timing"))?;
            }
            for resource in resources {
                sqlx::query(&sql(
                    "INSERT INTO build_resource_timings (build_id, job, phase, address, action, \
                     started_us, ended_us) VALUES (?, ?, ?, ?, ?, ?, ?) \
                     ON CONFLICT (build_id, job, phase, address) DO UPDATE SET \
                     action = excluded.action, started_us = excluded.started_us, \
                     ended_us = excluded.ended_us",
                ))
                .bind(build_id)
                .bind(&resource.job)
                .bind(&resource.phase)
                .bind(&resource.address)
                .bind(&resource.action)
                .bind(resource.started_us)
                .bind(resource.ended_us)
                .execute(&mut *tx)
                .await
                .map_err(db_error("build timing"))?;
            }
            tx.commit().await.map_err(db_error("build timing"))?;
            Ok(())
        }

        pub(crate) async fn build_timings(
            &self,
            build_id: &str,
        ) -> Result<crate::build_timings::BuildTimings, StoreError> {
            let stages: Vec<crate::build_timings::StageTiming> = sqlx::query_as(&sql(
                "SELECT job, stage, started_us, ended_us FROM build_stage_timings \
                 WHERE build_id = ? ORDER BY started_us, job, stage",
            ))
            .bind(build_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("build timing"))?;
            let resources: Vec<crate::build_timings::ResourceTiming> = sqlx::query_as(&sql(
                "SELECT job, phase, address, action, started_us, ended_us \
                 FROM build_resource_timings WHERE build_id = ? \
                 ORDER BY started_us, phase, address",
            ))
            .bind(build_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error("build timing"))?;
            Ok(crate::build_timings::BuildTimings { stages, resources })
        }

        /// An agent's lifecycle report, as its build's timings see it:
        /// `starting` (its first call) ends `agent_connected` (from the end
        /// of its build's last run stage) and starts `scripts`; `ready` or
        /// `start_error` ends `scripts`, and `ready` is its instant. Each
        /// once per agent: a restarted agent's reports change nothing.
        /// Answers the stages that ended now with their seconds, for the
        /// histograms (`ready`'s: from the build's request to it).
        pub(crate) async fn agent_lifecycle_timings(
            &self,
            agent_id: &str,
            lifecycle: AgentLifecycle,
        ) -> Result<Vec<(String, f64)>, StoreError> {
            let seconds = |from: i64, to: i64| (to - from).max(0) as f64 / 1e6;
            let now = self.now_ms().saturating_mul(1000);
            let agent: Option<(String, String)> =
                sqlx::query_as(&sql("SELECT build_id, name FROM agents WHERE id = ?"))
                    .bind(agent_id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error("agent"))?;
            let Some((build_id, name)) = agent else {
                return Ok(Vec::new());
            };
            let job = format!("agent:{name}");
            let insert = "INSERT INTO build_stage_timings (build_id, job, stage, started_us, ended_us) \
                 VALUES (?, ?, ?, ?, ?) ON CONFLICT (build_id, job, stage) DO NOTHING";
            let mut ended = Vec::new();
            match lifecycle {
                AgentLifecycle::Starting => {
                    let built: Option<i64> = sqlx::query_scalar(&sql(
                        "SELECT MAX(ended_us) FROM build_stage_timings \
                         WHERE build_id = ? AND job NOT LIKE 'agent:%'",
                    ))
                    .bind(&build_id)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(db_error("build timing"))?;
                    if let Some(built) = built {
                        let start = built.min(now);
                        let done = sqlx::query(&sql(insert))
                            .bind(&build_id)
                            .bind(&job)
                            .bind("agent_connected")
                            .bind(start)
                            .bind(Some(now))
                            .execute(&self.pool)
                            .await
                            .map_err(db_error("build timing"))?;
                        if done.rows_affected() == 1 {
                            ended.push(("agent_connected".to_string(), seconds(start, now)));
                        }
                    }
                    sqlx::query(&sql(insert))
                        .bind(&build_id)
                        .bind(&job)
                        .bind("scripts")
                        .bind(now)
                        .bind(None::<i64>)
                        .execute(&self.pool)
                        .await
                        .map_err(db_error("build timing"))?;
                }
                AgentLifecycle::Ready | AgentLifecycle::StartError => {
                    let started: Option<i64> = sqlx::query_scalar(&sql(
                        "UPDATE build_stage_timings SET ended_us = ? WHERE build_id = ? \
                         AND job = ? AND stage = 'scripts' AND ended_us IS NULL RETURNING started_us",
                    ))
                    .bind(now)
                    .bind(&build_id)
                    .bind(&job)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db_error("build timing"))?;
                    if let Some(started) = started {
                        ended.push(("scripts".to_string(), seconds(started, now)));
                        if lifecycle == AgentLifecycle::Ready {
                            sqlx::query(&sql(insert))
                                .bind(&build_id)
                                .bind(&job)
                                .bind("ready")
                                .bind(now)
                                .bind(Some(now))
                                .execute(&self.pool)
                                .await
                                .map_err(db_error("build timing"))?;
                            let requested: Option<i64> = sqlx::query_scalar(&sql(
                                "SELECT created_at FROM builds WHERE id = ?",
                            ))
                            .bind(&build_id)
                            .fetch_optional(&self.pool)
                            .await
                            .map_err(db_error("build"))?;
                            if let Some(requested) = requested {
                                let requested = requested.saturating_mul(1000);
                                ended.push(("ready".to_string(), seconds(requested, now)));
                            }
                        }
                    }
                }
            }
            Ok(ended)
        }
    };
}

pub(crate) use build_timing_queries;
