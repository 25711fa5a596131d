-- Guarded builds: a build may stop in 'awaiting_confirmation' with its saved
-- plan; workspaces remember their protected resources.

-- A held build holds its workspace like a running one.
DROP INDEX builds_one_active_per_workspace;
CREATE UNIQUE INDEX builds_one_active_per_workspace ON builds (workspace_id)
    WHERE status IN ('pending', 'running', 'awaiting_confirmation');

ALTER TABLE builds ADD COLUMN plan_digest TEXT;
ALTER TABLE builds ADD COLUMN expires_at INTEGER;
ALTER TABLE builds ADD COLUMN confirmed_by TEXT REFERENCES users (id);
ALTER TABLE builds ADD COLUMN confirmed_at INTEGER;

-- What a claimed job asks for: a whole build, or the apply of a confirmed,
-- saved plan.
ALTER TABLE jobs ADD COLUMN kind TEXT NOT NULL DEFAULT 'build';

-- Saved binary plans of held builds. They can hold secrets: kept only here,
-- never served, deleted when the build is confirmed and applied, canceled or
-- expired.
CREATE TABLE saved_plans (
    build_id     TEXT PRIMARY KEY REFERENCES builds (id) ON DELETE CASCADE,
    plan         BLOB NOT NULL,
    digest       TEXT NOT NULL,
    state_digest TEXT NOT NULL,
    created_at   INTEGER NOT NULL
);

CREATE TABLE workspace_protections (
    workspace_id TEXT NOT NULL REFERENCES workspaces (id),
    address      TEXT NOT NULL,
    mode         TEXT NOT NULL,
    build_id     TEXT NOT NULL REFERENCES builds (id),
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, address)
);

CREATE INDEX audit_events_target ON audit_events (target_type, target);
