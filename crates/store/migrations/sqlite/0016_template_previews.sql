-- Fleet previews (issue 16): a version planned against the live workspaces
-- of its template, never applied. A preview is a request; each workspace's
-- plan is a row of `preview_results`, which is its own queue: workers take a
-- row only when no build job waits, under a lease (a plan never applies, so
-- a row whose server died is simply planned again).
CREATE TABLE template_previews (
    id                  TEXT PRIMARY KEY,
    template_version_id TEXT NOT NULL REFERENCES template_versions (id) ON DELETE CASCADE,
    requested_by        TEXT NOT NULL REFERENCES users (id),
    -- Whether it covers named workspaces only (activation weighs the latest
    -- preview of the whole fleet).
    named               BOOLEAN NOT NULL DEFAULT FALSE,
    created_at          INTEGER NOT NULL
);
CREATE INDEX template_previews_version ON template_previews (template_version_id, created_at);

CREATE TABLE preview_results (
    id               TEXT PRIMARY KEY,
    preview_id       TEXT NOT NULL REFERENCES template_previews (id) ON DELETE CASCADE,
    -- The order the report lists workspaces in (owner name, then name, at
    -- the request): the page cursor.
    position         INTEGER NOT NULL,
    workspace_id     TEXT NOT NULL REFERENCES workspaces (id),
    status           TEXT NOT NULL,
    -- The transition the workspace was previewed as, read when it was planned.
    transition       TEXT,
    decision         TEXT,
    -- The guard's report (`abode plan check --format json`, docs/plan-check.md), sensitive values hidden.
    report           TEXT,
    error            TEXT,
    lease_holder     TEXT,
    -- The worker of `lease_holder` planning it (`abode provisioner list`).
    worker           TEXT,
    lease_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    started_at       INTEGER,
    finished_at      INTEGER,
    UNIQUE (preview_id, position)
);
CREATE INDEX preview_results_queue ON preview_results (status, created_at);
