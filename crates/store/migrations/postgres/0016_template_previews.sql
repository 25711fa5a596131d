-- Fleet previews (issue 16): a version planned against the live workspaces
-- of its template, never applied. A preview is a request; each workspace's
-- plan is a row of `preview_results`, which is its own queue: workers take a
-- row only when no build job waits, under a lease (a plan never applies, so
-- a row whose server died is simply planned again).
CREATE TABLE template_previews (
    id                  TEXT COLLATE "C" PRIMARY KEY,
    template_version_id TEXT COLLATE "C" NOT NULL REFERENCES template_versions (id) ON DELETE CASCADE,
    requested_by        TEXT COLLATE "C" NOT NULL REFERENCES users (id),
    -- Whether it covers named workspaces only (activation weighs the latest
    -- preview of the whole fleet).
    named               BOOLEAN NOT NULL DEFAULT FALSE,
    created_at          BIGINT NOT NULL
);
CREATE INDEX template_previews_version ON template_previews (template_version_id, created_at);

CREATE TABLE preview_results (
    id               TEXT COLLATE "C" PRIMARY KEY,
    preview_id       TEXT COLLATE "C" NOT NULL REFERENCES template_previews (id) ON DELETE CASCADE,
    -- The order the report lists workspaces in (owner name, then name, at
    -- the request): the page cursor.
    position         BIGINT NOT NULL,
    workspace_id     TEXT COLLATE "C" NOT NULL REFERENCES workspaces (id),
    status           TEXT COLLATE "C" NOT NULL,
    -- The transition the workspace was previewed as, read when it was planned.
    transition       TEXT COLLATE "C",
    decision         TEXT COLLATE "C",
    -- The guard's report (`abode plan check --format json`, docs/plan-check.md), sensitive values hidden.
    report           TEXT COLLATE "C",
    error            TEXT COLLATE "C",
    lease_holder     TEXT COLLATE "C",
    -- The worker of `lease_holder` planning it (`abode provisioner list`).
    worker           TEXT COLLATE "C",
    lease_expires_at BIGINT,
    created_at       BIGINT NOT NULL,
    started_at       BIGINT,
    finished_at      BIGINT,
    UNIQUE (preview_id, position)
);
CREATE INDEX preview_results_queue ON preview_results (status, created_at);
