-- The provisioners every server runs, as they last said they were alive
-- (`abode provisioner list`): each server's keeper writes a row per worker
-- at every round, and removes its rows when it stops; a row whose server
-- died stays with its last heartbeat until it is a day old.
CREATE TABLE provisioners (
    server_id    TEXT NOT NULL,
    name         TEXT NOT NULL,
    -- `embedded`: a worker inside `abode server`.
    kind         TEXT NOT NULL,
    -- A JSON object of the tags whose jobs it takes (`{}`: untagged jobs).
    tags         TEXT NOT NULL,
    version      TEXT NOT NULL,
    started_at   INTEGER NOT NULL,
    last_beat_at INTEGER NOT NULL,
    PRIMARY KEY (server_id, name)
);
