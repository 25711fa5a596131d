-- abode_script (issue 48, item 1): the scripts an agent runs (a JSON list of
-- their definitions), the longest timeout of its stop scripts (NULL when it
-- has none: a stop asks it to run them as it asks for a shutdown script),
-- and the latest run of each script with the end of its output.
ALTER TABLE agents ADD COLUMN scripts TEXT;
ALTER TABLE agents ADD COLUMN stop_timeout_seconds BIGINT;

-- `state`: running, succeeded, failed, timed_out, not_run. `runs` counts
-- the agent's runs of the script (a new number starts a new run).
CREATE TABLE agent_script_runs (
    workspace_id TEXT NOT NULL,
    agent_name   TEXT NOT NULL,
    display_name TEXT NOT NULL,
    state        TEXT NOT NULL,
    exit_status  BIGINT,
    started_at   BIGINT NOT NULL,
    ended_at     BIGINT,
    runs         BIGINT NOT NULL,
    log          TEXT NOT NULL,
    PRIMARY KEY (workspace_id, agent_name, display_name)
);
