-- Provisioner keys (issue 15): the credentials external provisioner daemons
-- (`abode provisioner start --key-file`) authenticate with. Only the
-- SHA-256 of each key is kept; the key itself is shown once, at creation.
-- `tags` is the JSON object of the tags a daemon using the key offers.
CREATE TABLE provisioner_keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    secret_hash TEXT NOT NULL UNIQUE,
    tags        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    created_by  TEXT NOT NULL REFERENCES users (id)
);
