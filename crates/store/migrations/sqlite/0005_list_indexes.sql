-- Lists are one query per page in the order of their sort key (pages.rs):
-- a member's workspaces are read in name order within their owner, and the
-- audit log is filtered by actor and action without a full scan.
CREATE INDEX workspaces_owner_list ON workspaces (owner_id, name, created_at, id);
CREATE INDEX audit_events_actor ON audit_events (actor_name, id);
CREATE INDEX audit_events_action ON audit_events (action, id);
