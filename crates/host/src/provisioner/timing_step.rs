//! A build's timings as the server records them (issue 50): the stages it
//! measures itself on its clock (queue wait, snapshot, guard, retain,
//! quota) and the stages and resources a run measured where Terraform ran,
//! anchored on the server's clock when the run told them (its offsets are
//! from the run's start, `elapsed_us` ago). Each stage ended is observed in
//! `abode_build_stage_seconds`. A timing that cannot be written is logged,
//! never a build's failure.

use abode_contract::timings::Stage;
use abode_runner::RunTimings;
use abode_store::{JobKind, ResourceTiming, StageTiming};

use super::on_server::ServerJob;

/// When a stage started, on the server's clock (Unix µs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Started(i64);

impl ServerJob {
    /// The server's clock now, in µs.
    pub(crate) fn now_us(&self) -> i64 {
        self.host().now_ms().saturating_mul(1000)
    }

    /// A stage starts now.
    pub(crate) fn stage_starts(&self) -> Started {
        Started(self.now_us())
    }

    /// The run's name among the build's: a confirmed plan's apply is a run
    /// of its own.
    fn job_name(&self) -> &'static str {
        match self.kind() {
            JobKind::Build => "build",
            JobKind::ApplySavedPlan => "apply_saved_plan",
        }
    }

    /// A stage that started at `started` ended now.
    pub(crate) async fn stage_ended(&self, stage: Stage, started: Started) {
        let stage = StageTiming {
            job: self.job_name().to_string(),
            stage: stage.as_str().to_string(),
            started_us: started.0,
            ended_us: Some(self.now_us().max(started.0)),
        };
        self.write(vec![stage], &[]).await;
    }

    /// From the build's request (or its confirmation) to this handout.
    pub(crate) async fn queue_wait_ended(&self) {
        let build = self.build();
        let queued = match self.kind() {
            JobKind::Build => Some(build.created_at),
            JobKind::ApplySavedPlan => build.confirmed_at,
        };
        if let Some(queued) = queued {
            self.stage_ended(Stage::QueueWait, Started(queued.saturating_mul(1000)))
                .await;
        }
    }

    /// What a run measured, anchored on the server's clock now.
    pub(crate) async fn run_timings(&self, timings: RunTimings) {
        let elapsed = i64::try_from(timings.elapsed_us).unwrap_or(i64::MAX);
        let base = self.now_us().saturating_sub(elapsed);
        let at = |offset: u64| base.saturating_add(i64::try_from(offset).unwrap_or(i64::MAX));
        let job = self.job_name();
        let stages = timings
            .stages
            .iter()
            .map(|span| StageTiming {
                job: job.to_string(),
                stage: span.stage.as_str().to_string(),
                started_us: at(span.start_us),
                ended_us: Some(at(span.end_us.max(span.start_us))),
            })
            .collect();
        let resources: Vec<ResourceTiming> = timings
            .resources
            .iter()
            .map(|span| ResourceTiming {
                job: job.to_string(),
                phase: span.phase.as_str().to_string(),
                // An address may hold a value (a `for_each` key): masked
                // like the log.
                address: self.masked(&span.address).chars().take(1024).collect(),
                action: span.action.chars().take(32).collect(),
                started_us: at(span.start_us),
                ended_us: at(span.end_us.max(span.start_us)),
            })
            .collect();
        self.write(stages, &resources).await;
    }

    /// Writes stages and resources in one transaction, then observes the
    /// stages.
    async fn write(&self, stages: Vec<StageTiming>, resources: &[ResourceTiming]) {
        if stages.is_empty() && resources.is_empty() {
            return;
        }
        let host = self.host();
        if let Err(error) = host
            .inner
            .store
            .put_timings(&self.build().id, &stages, resources)
            .await
        {
            tracing::error!(build = %self.build().id, %error, "cannot record the build's timings");
            return;
        }
        for stage in &stages {
            let seconds = stage
                .ended_us
                .map_or(0, |ended| ended.saturating_sub(stage.started_us));
            host.inner
                .config
                .metrics
                .build_stage(&stage.stage, seconds as f64 / 1e6);
        }
    }
}
