-- Build timings (issue 50): when each stage of a build started and ended,
-- measured (never estimated); a stage that did not run has no row, one under
-- way has no `ended_us`. `job` is the run it belongs to: `build` (the plan
-- and its apply), `apply_saved_plan` (a confirmed plan's apply) or
-- `agent:NAME` (an agent of the build: connected, scripts, ready). Times are
-- Unix microseconds on the server's clock.
CREATE TABLE build_stage_timings (
    build_id TEXT NOT NULL,
    job TEXT NOT NULL,
    stage TEXT NOT NULL,
    started_us BIGINT NOT NULL,
    ended_us BIGINT,
    PRIMARY KEY (build_id, job, stage)
);
-- Each Terraform resource's time in a run's plan (refresh, a data source's
-- read) or apply, from Terraform's `-json` events: its duration is the
-- difference of Terraform's own timestamps.
CREATE TABLE build_resource_timings (
    build_id TEXT NOT NULL,
    job TEXT NOT NULL,
    phase TEXT NOT NULL,
    address TEXT NOT NULL,
    action TEXT NOT NULL,
    started_us BIGINT NOT NULL,
    ended_us BIGINT NOT NULL,
    PRIMARY KEY (build_id, job, phase, address)
);
