-- The SSH host key of each workspace (issue 14), kept by the platform so that
-- it survives every stop and start and `known_hosts` never complains: the
-- 32-byte Ed25519 seed, hex. Handed only to the workspace's agent.
CREATE TABLE workspace_host_keys (
    workspace_id TEXT PRIMARY KEY REFERENCES workspaces (id),
    seed         TEXT NOT NULL,
    created_at   INTEGER NOT NULL
);
