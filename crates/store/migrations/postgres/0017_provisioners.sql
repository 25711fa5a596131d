-- The provisioners every server runs, as they last said they were alive
-- (`abode provisioner list`): each server's keeper writes a row per worker
-- at every round, and removes its rows when it stops; a row whose server
-- died stays with its last heartbeat until it is a day old.
CREATE TABLE provisioners (
    server_id    TEXT COLLATE "C" NOT NULL,
    name         TEXT COLLATE "C" NOT NULL,
    -- `embedded`: a worker inside `abode server`.
    kind         TEXT COLLATE "C" NOT NULL,
    -- A JSON object of the tags whose jobs it takes (`{}`: untagged jobs).
    tags         TEXT COLLATE "C" NOT NULL,
    version      TEXT COLLATE "C" NOT NULL,
    started_at   BIGINT NOT NULL,
    last_beat_at BIGINT NOT NULL,
    PRIMARY KEY (server_id, name)
);
