-- Sessions and API tokens share the api_tokens table (both are bearer tokens
-- stored as their SHA-256). `kind` tells them apart: a session (from a login)
-- expires by the server's idle and lifetime policy, computed at each use from
-- created_at and last_used_at, so rows written before this migration become
-- sessions under that policy; an API token has a name (unique per user among
-- live tokens) and its own expires_at. A revoked token keeps its row, marked.
-- Same as the SQLite migration 0004.

ALTER TABLE api_tokens ADD COLUMN kind TEXT NOT NULL DEFAULT 'session'
    CHECK (kind IN ('session', 'api'));
ALTER TABLE api_tokens ADD COLUMN name TEXT;
ALTER TABLE api_tokens ADD COLUMN expires_at BIGINT;
ALTER TABLE api_tokens ADD COLUMN revoked_at BIGINT;

CREATE UNIQUE INDEX api_tokens_user_name_live ON api_tokens (user_id, name)
    WHERE name IS NOT NULL AND revoked_at IS NULL;
