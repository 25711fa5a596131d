-- A uid of its own for each workspace (issue 46, --workspace-uids): the
-- uid its processes run as and its volumes belong to. A uid is given once
-- and never again, to no other workspace, even after its workspace is gone
-- (a retained volume may still be owned by it): rows are never deleted.
CREATE TABLE workspace_uids (
    uid          BIGINT PRIMARY KEY,
    workspace_id TEXT NOT NULL UNIQUE,
    given_at     BIGINT NOT NULL
);
