-- Host-local workspaces (issue 46): an `abode_volume` is a directory on the
-- machine whose provisioner built it, an `abode_process` runs under that
-- machine's supervisor. With several servers or daemons on one database, a
-- workspace holding either is built only by a provisioner of that host.
--
-- The host a workspace's host-local resources are on: a server's id (its
-- built-in provisioners) or an external daemon's id. Set by every state a
-- build's run stores (to the run's host when the state holds host-local
-- resources, to NULL when it holds none; a delete keeps it for what it
-- retained), and by a person's move. NULL: builds go to any provisioner.
ALTER TABLE workspaces ADD COLUMN host TEXT COLLATE "C";
-- The host of the provisioner that claimed the job: where its run is.
ALTER TABLE jobs ADD COLUMN host TEXT COLLATE "C";
-- The host a queued job's log said it waits for: said once, by one server.
ALTER TABLE jobs ADD COLUMN waiting_for_host TEXT COLLATE "C";
-- The host each provisioner runs on ('' for rows of an older server).
ALTER TABLE provisioners ADD COLUMN host TEXT COLLATE "C" NOT NULL DEFAULT '';
-- Workspaces built before: on the host that wrote their state, if it holds
-- a volume or a process (a server's lease holder is its id; a daemon's is
-- `provisioner:KEY_ID/KEY/DAEMON_ID`).
UPDATE workspaces w SET host = (
    SELECT CASE
        WHEN j.lease_holder LIKE 'provisioner:%' THEN split_part(j.lease_holder, '/', 3)
        ELSE j.lease_holder
    END
    FROM workspace_states s JOIN jobs j ON j.build_id = s.build_id
    WHERE s.workspace_id = w.id
      AND (position(convert_to('"type": "abode_volume"', 'UTF8') IN s.state) > 0
           OR position(convert_to('"type": "abode_process"', 'UTF8') IN s.state) > 0)
);
