-- Which process runs as each server id (issue 26): a data dir copied to
-- start a second server carries the first one's id, and two servers with
-- one id would take each other's builds for their own. A server records its
-- host, data dir and pid at start and beats every keeper round; a start
-- that finds its id live from another host or data dir is refused.
CREATE TABLE server_instances (
    server_id TEXT NOT NULL PRIMARY KEY,
    host      TEXT NOT NULL,
    data_dir  TEXT NOT NULL,
    pid       INTEGER NOT NULL,
    beat_at   INTEGER NOT NULL
);
