-- Stop scripts and disk-full warnings (issue 47, parts 4 and 5).
-- What an agent's `abode_agent` says about its shutdown script and its
-- home volume's thresholds, and what the agent last said of its home volume.
ALTER TABLE agents ADD COLUMN shutdown_script TEXT;
ALTER TABLE agents ADD COLUMN shutdown_timeout_seconds BIGINT;
-- The thresholds in percent, comma-separated ("90,98").
ALTER TABLE agents ADD COLUMN disk_warning_percents TEXT;
ALTER TABLE agents ADD COLUMN disk_used_bytes BIGINT;
ALTER TABLE agents ADD COLUMN disk_total_bytes BIGINT;
ALTER TABLE agents ADD COLUMN disk_reported_at BIGINT;

-- A stop, restart or delete asked an agent to run its shutdown script before
-- its apply: one row per build and agent. The agent's heartbeat answer says
-- so while `ended_at` is NULL; the agent's report ends it, or the build
-- gives up at `deadline` (the server's clock). `outcome`: succeeded,
-- failed, timed_out, not_run, not_connected, no_answer. `output` is the
-- end of the script's output. `logged` is set once the build's log says
-- how it ended (once, whichever server or daemon looked).
CREATE TABLE agent_shutdowns (
    build_id         TEXT NOT NULL,
    agent_id         TEXT NOT NULL,
    agent_name       TEXT NOT NULL,
    workspace_id     TEXT NOT NULL,
    script           TEXT NOT NULL,
    timeout_seconds  BIGINT NOT NULL,
    requested_at     BIGINT NOT NULL,
    deadline         BIGINT NOT NULL,
    ended_at         BIGINT,
    outcome          TEXT,
    exit_status      BIGINT,
    output           TEXT,
    logged           BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (build_id, agent_id)
);
CREATE INDEX agent_shutdowns_pending ON agent_shutdowns (agent_id, ended_at);

-- When the owner was last told that a workspace's home volume reached a
-- threshold: at most once a day per workspace and threshold.
CREATE TABLE workspace_disk_warnings (
    workspace_id TEXT NOT NULL,
    percent      BIGINT NOT NULL,
    notified_at  BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, percent)
);
