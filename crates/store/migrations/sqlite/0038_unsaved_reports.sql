-- The last report of unsaved work (Git repositories with changes that exist
-- nowhere else) each workspace's agent sent (issue 47). Kept while the
-- workspace is stopped: a stopped workspace's delete is judged by it.
-- `report` is the agent's report as JSON; `made_at` is when the server
-- received it (its clock, not the workspace's). `held_digest` is the
-- digest of the report an automatic delete was last held for: the hold is
-- audited and told once per report, not at every scheduler pass.
CREATE TABLE workspace_unsaved_reports (
    workspace_id TEXT PRIMARY KEY,
    made_at      INTEGER NOT NULL,
    report       TEXT NOT NULL,
    held_digest  TEXT
);

-- A person asked for a fresh report (`abode show --scan-unsaved`): the
-- agent's next heartbeat is told to scan now, until a report newer than
-- `requested_at` came.
CREATE TABLE workspace_unsaved_scan_requests (
    workspace_id TEXT PRIMARY KEY,
    requested_at INTEGER NOT NULL
);
