-- Retain on delete (issue 32). What a workspace remembers of each
-- protected resource's delete rule (abode_protect's on_delete, retain_for,
-- expire): NULL retain_expire means a delete destroys it.
ALTER TABLE workspace_protections ADD COLUMN retain_expire TEXT;
ALTER TABLE workspace_protections ADD COLUMN retain_for_secs BIGINT;

-- What a delete build retains: 'rules' (the template's rules), 'all'
-- (abode delete --retain), 'none' (--no-retain). NULL for other builds.
ALTER TABLE builds ADD COLUMN retention TEXT;

-- A resource a delete forgot instead of destroying, which the platform
-- still owns. status: 'pending' (its delete has not ended), 'open',
-- 'adopted' (imported into a workspace), 'destroyed', 'void' (its delete
-- ended with the resource still in the workspace's state).
CREATE TABLE retained_resources (
    id               TEXT PRIMARY KEY,
    status           TEXT NOT NULL,
    address          TEXT NOT NULL,
    resource_type    TEXT NOT NULL,
    provider         TEXT NOT NULL,
    import_id        TEXT NOT NULL,
    attributes       TEXT NOT NULL,
    workspace_id     TEXT NOT NULL,
    workspace_name   TEXT NOT NULL,
    owner_id         TEXT NOT NULL REFERENCES users (id),
    template_name    TEXT NOT NULL,
    template_version BIGINT NOT NULL,
    build_id         TEXT NOT NULL,
    retained_by      TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    expires_at       BIGINT,
    expire_action    TEXT NOT NULL,
    adopt_for        TEXT,
    closed_at        BIGINT,
    closed_by        TEXT,
    closed_build_id  TEXT,
    -- The resource's object as the workspace's state held it before the
    -- delete (secrets included, like any stored state; never served): what
    -- a destroy of the record puts back into a state to destroy it.
    state_fragment   TEXT,
    -- The build destroying it (abode retained destroy, or its expiry).
    destroy_build_id TEXT,
    UNIQUE (build_id, address)
);

CREATE INDEX retained_resources_open ON retained_resources (status, created_at, id);
CREATE INDEX retained_resources_adopt ON retained_resources (adopt_for);
