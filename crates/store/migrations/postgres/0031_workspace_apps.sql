-- Apps served inside workspaces (issue 33): each abode_app of a start's
-- state, by the agent that serves it. `definition` is the app as
-- abode_contract::apps::AppDefinition (JSON), `health` what its agent last
-- reported: 'disabled', 'initializing', 'healthy' or 'unhealthy'.
CREATE TABLE workspace_apps (
    id                TEXT PRIMARY KEY,
    workspace_id      TEXT NOT NULL,
    agent_id          TEXT NOT NULL,
    agent_name        TEXT NOT NULL,
    slug              TEXT NOT NULL,
    definition        TEXT NOT NULL,
    health            TEXT NOT NULL,
    health_changed_at BIGINT,
    UNIQUE (workspace_id, agent_name, slug)
);
CREATE INDEX workspace_apps_agent ON workspace_apps (agent_id);
