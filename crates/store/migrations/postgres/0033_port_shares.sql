-- Ports shared without a template change (issue 33, abode port-share): a
-- workspace's port, on one of its agents, opened to 'authenticated' or
-- 'public' visitors like an app; a template says how far its workspaces
-- may share ('owner': not at all, the default).
ALTER TABLE templates ADD COLUMN max_port_share TEXT NOT NULL DEFAULT 'owner';
CREATE TABLE workspace_port_shares (
    workspace_id TEXT NOT NULL,
    agent_name   TEXT NOT NULL,
    port         INTEGER NOT NULL,
    share        TEXT NOT NULL,
    created_by   TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, agent_name, port)
);
