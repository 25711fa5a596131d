-- Abode's schema on PostgreSQL: the same tables as the SQLite migrations up to
-- their 0002, in PostgreSQL types. Append-only from here: never edit a file
-- that has shipped, add the next numbered one. Times are Unix milliseconds.

CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    username      TEXT NOT NULL UNIQUE,
    email         TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('owner', 'template-admin', 'member')),
    password_hash TEXT NOT NULL,
    created_at    BIGINT NOT NULL
);

CREATE TABLE api_tokens (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT
);

CREATE TABLE templates (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL UNIQUE,
    active_version_id TEXT,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
);

CREATE TABLE template_versions (
    id                 TEXT PRIMARY KEY,
    template_id        TEXT NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
    number             BIGINT NOT NULL,
    archive            BYTEA NOT NULL,
    archive_sha256     TEXT NOT NULL,
    message            TEXT NOT NULL,
    created_by         TEXT NOT NULL REFERENCES users (id),
    validation_ok      BOOLEAN NOT NULL,
    validation_message TEXT NOT NULL,
    created_at         BIGINT NOT NULL,
    UNIQUE (template_id, number)
);

CREATE TABLE workspaces (
    id                  TEXT PRIMARY KEY,
    owner_id            TEXT NOT NULL REFERENCES users (id),
    name                TEXT NOT NULL,
    template_id         TEXT NOT NULL REFERENCES templates (id),
    template_version_id TEXT NOT NULL REFERENCES template_versions (id),
    parameters          TEXT NOT NULL,
    deleted             BOOLEAN NOT NULL DEFAULT FALSE,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL
);
CREATE UNIQUE INDEX workspaces_owner_name_live ON workspaces (owner_id, name) WHERE NOT deleted;

CREATE TABLE builds (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL REFERENCES workspaces (id),
    number              BIGINT NOT NULL,
    transition          TEXT NOT NULL CHECK (transition IN ('start', 'stop', 'delete')),
    status              TEXT NOT NULL,
    template_version_id TEXT NOT NULL REFERENCES template_versions (id),
    initiator_id        TEXT NOT NULL REFERENCES users (id),
    reason              TEXT NOT NULL,
    error               TEXT,
    plan_json           TEXT,
    guard_report        TEXT,
    created_at          BIGINT NOT NULL,
    started_at          BIGINT,
    finished_at         BIGINT,
    plan_digest         TEXT,
    expires_at          BIGINT,
    confirmed_by        TEXT REFERENCES users (id),
    confirmed_at        BIGINT,
    UNIQUE (workspace_id, number)
);
CREATE UNIQUE INDEX builds_one_active_per_workspace ON builds (workspace_id)
    WHERE status IN ('pending', 'running', 'awaiting_confirmation');

CREATE TABLE build_logs (
    build_id TEXT NOT NULL REFERENCES builds (id) ON DELETE CASCADE,
    seq      BIGINT NOT NULL,
    time     BIGINT NOT NULL,
    stage    TEXT NOT NULL,
    level    TEXT NOT NULL,
    text     TEXT NOT NULL,
    PRIMARY KEY (build_id, seq)
);

CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,
    build_id         TEXT NOT NULL UNIQUE REFERENCES builds (id),
    status           TEXT NOT NULL CHECK (status IN ('queued', 'claimed', 'done')),
    worker           TEXT,
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    created_at       BIGINT NOT NULL,
    claimed_at       BIGINT,
    finished_at      BIGINT,
    kind             TEXT NOT NULL DEFAULT 'build'
);
CREATE INDEX jobs_queued ON jobs (status, created_at);

CREATE TABLE workspace_states (
    workspace_id TEXT PRIMARY KEY REFERENCES workspaces (id),
    build_id     TEXT NOT NULL REFERENCES builds (id),
    state        BYTEA NOT NULL,
    updated_at   BIGINT NOT NULL
);

CREATE TABLE agents (
    id                TEXT PRIMARY KEY,
    workspace_id      TEXT NOT NULL REFERENCES workspaces (id),
    build_id          TEXT NOT NULL REFERENCES builds (id),
    name              TEXT NOT NULL,
    token_hash        TEXT NOT NULL UNIQUE,
    lifecycle         TEXT,
    connected_at      BIGINT,
    last_heartbeat_at BIGINT,
    created_at        BIGINT NOT NULL
);
CREATE INDEX agents_workspace ON agents (workspace_id);

CREATE TABLE audit_events (
    id          BIGSERIAL PRIMARY KEY,
    time        BIGINT NOT NULL,
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
CREATE INDEX audit_events_target ON audit_events (target_type, target);

CREATE TABLE saved_plans (
    build_id     TEXT PRIMARY KEY REFERENCES builds (id) ON DELETE CASCADE,
    plan         BYTEA NOT NULL,
    digest       TEXT NOT NULL,
    state_digest TEXT NOT NULL,
    created_at   BIGINT NOT NULL
);

CREATE TABLE workspace_protections (
    workspace_id TEXT NOT NULL REFERENCES workspaces (id),
    address      TEXT NOT NULL,
    mode         TEXT NOT NULL,
    build_id     TEXT NOT NULL REFERENCES builds (id),
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, address)
);
