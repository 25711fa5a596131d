-- Which server holds each agent's tunnel, and the URL other servers reach it
-- at: with several servers, a person's connection that reaches a server
-- without the tunnel is relayed to the one with it. A row is written when
-- the tunnel comes up and removed when it goes down (only by the server
-- that holds it: a reconnect to another server has replaced it).
CREATE TABLE agent_tunnels (
    token_hash   TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    workspace_id TEXT COLLATE "C" NOT NULL,
    agent_name   TEXT COLLATE "C" NOT NULL,
    server_id    TEXT COLLATE "C" NOT NULL,
    relay_url    TEXT COLLATE "C" NOT NULL,
    connected_at BIGINT NOT NULL
);
CREATE INDEX agent_tunnels_by_workspace ON agent_tunnels (workspace_id, agent_name);
