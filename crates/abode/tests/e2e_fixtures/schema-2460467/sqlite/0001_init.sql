-- Abode's first schema. Migrations are append-only: never edit a file that has
-- shipped, add the next numbered one. Times are Unix milliseconds (UTC).

CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    username      TEXT NOT NULL UNIQUE,
    email         TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('owner', 'template-admin', 'member')),
    password_hash TEXT NOT NULL,
    created_at    INTEGER NOT NULL
);

CREATE TABLE api_tokens (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER
);

CREATE TABLE templates (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL UNIQUE,
    active_version_id TEXT,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);

CREATE TABLE template_versions (
    id                 TEXT PRIMARY KEY,
    template_id        TEXT NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
    number             INTEGER NOT NULL,
    archive            BLOB NOT NULL,
    archive_sha256     TEXT NOT NULL,
    message            TEXT NOT NULL,
    created_by         TEXT NOT NULL REFERENCES users (id),
    validation_ok      INTEGER NOT NULL,
    validation_message TEXT NOT NULL,
    created_at         INTEGER NOT NULL,
    UNIQUE (template_id, number)
);

CREATE TABLE workspaces (
    id                  TEXT PRIMARY KEY,
    owner_id            TEXT NOT NULL REFERENCES users (id),
    name                TEXT NOT NULL,
    template_id         TEXT NOT NULL REFERENCES templates (id),
    template_version_id TEXT NOT NULL REFERENCES template_versions (id),
    parameters          TEXT NOT NULL,
    deleted             INTEGER NOT NULL DEFAULT 0,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
);
-- Names are unique per owner among live workspaces only: a deleted one frees its name.
CREATE UNIQUE INDEX workspaces_owner_name_live ON workspaces (owner_id, name) WHERE deleted = 0;

CREATE TABLE builds (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces (id),
    number              INTEGER NOT NULL,
    transition          TEXT NOT NULL CHECK (transition IN ('start', 'stop', 'delete')),
    status              TEXT NOT NULL,
    template_version_id TEXT NOT NULL REFERENCES template_versions (id),
    initiator_id        TEXT NOT NULL REFERENCES users (id),
    reason              TEXT NOT NULL,
    error               TEXT,
    plan_json           TEXT,
    guard_report        TEXT,
    created_at          INTEGER NOT NULL,
    started_at          INTEGER,
    finished_at         INTEGER,
    UNIQUE (workspace_id, number)
);
-- One build at a time per workspace, enforced by the database itself so that two
-- concurrent starts cannot both be accepted. A later migration that adds
-- 'awaiting_confirmation' recreates this index with it.
CREATE UNIQUE INDEX builds_one_active_per_workspace ON builds (workspace_id)
    WHERE status IN ('pending', 'running');

CREATE TABLE build_logs (
    build_id TEXT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    seq      INTEGER NOT NULL,
    time     INTEGER NOT NULL,
    stage    TEXT NOT NULL,
    level    TEXT NOT NULL,
    text     TEXT NOT NULL,
    PRIMARY KEY (build_id, seq)
);

-- The provisioner queue: one job per build. Claimed with a single UPDATE so that
-- embedded workers and (later) external provisioners over the API share it.
CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,
    build_id         TEXT NOT NULL UNIQUE REFERENCES builds (id),
    status           TEXT NOT NULL CHECK (status IN ('queued', 'claimed', 'done')),
    worker           TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL,
    claimed_at       INTEGER,
    finished_at      INTEGER
);
CREATE INDEX jobs_queued ON jobs (status, created_at);

CREATE TABLE workspace_states (
    workspace_id TEXT PRIMARY KEY REFERENCES workspaces (id),
    build_id     TEXT NOT NULL REFERENCES builds (id),
    state        BLOB NOT NULL,
    updated_at   INTEGER NOT NULL
);

CREATE TABLE agents (
    id                TEXT PRIMARY KEY,
    workspace_id      TEXT NOT NULL REFERENCES workspaces (id),
    build_id          TEXT NOT NULL REFERENCES builds (id),
    name              TEXT NOT NULL,
    token_hash        TEXT NOT NULL UNIQUE,
    lifecycle         TEXT,
    connected_at      INTEGER,
    last_heartbeat_at INTEGER,
    created_at        INTEGER NOT NULL
);
CREATE INDEX agents_workspace ON agents (workspace_id);

CREATE TABLE audit_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    time        INTEGER NOT NULL,
    actor_id    TEXT,
    actor_name  TEXT,
    action      TEXT NOT NULL,
    target_type TEXT NOT NULL,
    target      TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    request_id  TEXT,
    details     TEXT
);
CREATE INDEX audit_events_time ON audit_events (time);
