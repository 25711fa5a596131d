-- Provisioner keys (issue 15): the credentials external provisioner daemons
-- (`abode provisioner start --key-file`) authenticate with. Only the
-- SHA-256 of each key is kept; the key itself is shown once, at creation.
-- `tags` is the JSON object of the tags a daemon using the key offers.
CREATE TABLE provisioner_keys (
    id          TEXT COLLATE "C" PRIMARY KEY,
    name        TEXT COLLATE "C" NOT NULL UNIQUE,
    secret_hash TEXT COLLATE "C" NOT NULL UNIQUE,
    tags        TEXT COLLATE "C" NOT NULL,
    created_at  BIGINT NOT NULL,
    created_by  TEXT COLLATE "C" NOT NULL REFERENCES users (id)
);
