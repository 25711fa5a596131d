-- Actors and reasons (issue 10): builds say why they were requested, the
-- system's own actors have reserved accounts, a build may carry its own
-- parameter values, and audit events refer to workspaces by id.

-- Every build before this release was asked for by a person.
UPDATE builds SET reason = 'initiator'
    WHERE reason IN ('create', 'start', 'stop', 'delete', 'update');

-- Reserved accounts of the server, the scheduler and prebuilds: no
-- password, never listed, not "a user" for the first-user check. The server
-- inserts them at start (renaming a person who holds a reserved name).
ALTER TABLE users ADD COLUMN system BOOLEAN NOT NULL DEFAULT FALSE;

-- Parameter values of this build (NULL: the workspace's own), and what the
-- workspace keeps of them when the build succeeds (NULL: all of them;
-- ephemeral values are left out).
ALTER TABLE builds ADD COLUMN parameters TEXT;
ALTER TABLE builds ADD COLUMN workspace_parameters TEXT;

-- The workspace an event is about, so that its history follows it through
-- a rename or a transfer; `target` keeps the name it had then.
ALTER TABLE audit_events ADD COLUMN workspace_id TEXT;
UPDATE audit_events SET workspace_id = (
    SELECT w.id FROM workspaces w JOIN users u ON u.id = w.owner_id
    WHERE u.username || '/' || w.name = audit_events.target
    ORDER BY w.deleted ASC, w.created_at DESC LIMIT 1
) WHERE target_type = 'workspace';
CREATE INDEX audit_events_workspace ON audit_events (workspace_id, id);
