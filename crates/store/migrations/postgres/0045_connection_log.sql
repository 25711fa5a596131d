-- The connection log (issue 49): every SSH session, port forward, terminal
-- session and app session opened through Abode, written when it opens (on
-- the server that holds the workspace agent's tunnel, `server_id`) and
-- completed when it closes. A row without `closed_at` is open, or its
-- server was killed: that server marks its own such rows `server_lost` at
-- its next start. Rows outlive their workspace and person (no foreign
-- keys): `user_name` and `workspace_name` are the names at open.
CREATE TABLE connection_log (
    id TEXT PRIMARY KEY,
    server_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    user_name TEXT NOT NULL,
    token_name TEXT,
    workspace_id TEXT NOT NULL,
    workspace_name TEXT NOT NULL,
    kind TEXT NOT NULL,
    app TEXT,
    port INTEGER,
    client_ip TEXT,
    user_agent TEXT,
    opened_at BIGINT NOT NULL,
    closed_at BIGINT,
    bytes_to_workspace BIGINT NOT NULL DEFAULT 0,
    bytes_from_workspace BIGINT NOT NULL DEFAULT 0,
    end_reason TEXT
);
CREATE INDEX connection_log_opened ON connection_log (opened_at, id);
CREATE INDEX connection_log_workspace ON connection_log (workspace_id, opened_at);
CREATE INDEX connection_log_open ON connection_log (server_id) WHERE closed_at IS NULL;
