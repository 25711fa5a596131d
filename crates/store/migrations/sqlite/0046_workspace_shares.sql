-- Workspace sharing (issue 49): each entry names one user or one group and
-- a role on one workspace, `use` (connect: SSH, port forwards, the terminal,
-- `owner` apps) or `admin` (also start, stop, restart and update it). What
-- a role allows is `abode-authz`'s. A template may forbid sharing the
-- workspaces made from it (`abode templates edit T --allow-sharing=false`).
CREATE TABLE workspace_shares (
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    user_id      TEXT REFERENCES users (id) ON DELETE CASCADE,
    group_id     TEXT REFERENCES groups (id) ON DELETE CASCADE,
    role         TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    CHECK ((user_id IS NULL) <> (group_id IS NULL))
);
CREATE UNIQUE INDEX workspace_shares_user ON workspace_shares (workspace_id, user_id)
    WHERE user_id IS NOT NULL;
CREATE UNIQUE INDEX workspace_shares_group ON workspace_shares (workspace_id, group_id)
    WHERE group_id IS NOT NULL;
CREATE INDEX workspace_shares_by_user ON workspace_shares (user_id);
CREATE INDEX workspace_shares_by_group ON workspace_shares (group_id);

ALTER TABLE templates ADD COLUMN allow_sharing BOOLEAN NOT NULL DEFAULT TRUE;
