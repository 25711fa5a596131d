-- Signing in to subdomain apps (issue 33): a one-time 'code' minted on the
-- dashboard's origin for one app host, exchanged on that host for a
-- 'session' kept in a cookie of that host only. Only token hashes are kept.
CREATE TABLE app_tokens (
    token_hash TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    user_id    TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    host       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX app_tokens_expiry ON app_tokens (expires_at);
