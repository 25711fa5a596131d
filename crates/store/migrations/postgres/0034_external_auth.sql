-- External auth (issue 34): the accounts people linked, their tokens
-- sealed by the server's key (abode-external-auth's cipher: the key id is
-- beside each token), and the links under way (the OAuth state, kept only
-- as its hash, and the PKCE verifier, sealed), each until it expires.
CREATE TABLE external_auth_links (
    user_id       TEXT NOT NULL,
    provider_id   TEXT NOT NULL,
    access_token  TEXT NOT NULL,
    refresh_token TEXT,
    expires_at    BIGINT,
    key_id        TEXT NOT NULL,
    linked_at     BIGINT NOT NULL,
    refreshed_at  BIGINT NOT NULL,
    PRIMARY KEY (user_id, provider_id)
);
CREATE TABLE external_auth_pending (
    state_hash  TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL,
    provider_id TEXT NOT NULL,
    verifier    TEXT NOT NULL,
    expires_at  BIGINT NOT NULL
);
