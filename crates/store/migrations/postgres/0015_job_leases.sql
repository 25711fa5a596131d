-- Several servers on one database: a claimed job is held by one server under a
-- lease it renews while the build runs. A server that starts takes over only
-- the builds it held itself (or that no server held: rows from before this
-- migration, when one server ran everything); another server's build is failed
-- only once that server's lease has expired.
ALTER TABLE jobs ADD COLUMN lease_holder TEXT COLLATE "C";
ALTER TABLE jobs ADD COLUMN lease_expires_at BIGINT;
CREATE INDEX jobs_claimed_lease ON jobs (status, lease_expires_at);
