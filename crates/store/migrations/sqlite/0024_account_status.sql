-- Accounts have a status (issue 30): active; suspended by a user admin
-- (refused at every request, not autostarted, told nothing); dormant after
-- `--dormancy-period` unseen (active again at their next sign-in); deleted
-- (kept for the history that names them, refused everywhere). The last
-- time an account was seen (a sign-in, or a request at most an hour apart)
-- decides dormancy.
ALTER TABLE users ADD COLUMN status TEXT NOT NULL DEFAULT 'active'
    CHECK (status IN ('active', 'suspended', 'dormant', 'deleted'));
ALTER TABLE users ADD COLUMN last_seen_at INTEGER;

-- Who an audited request came from and how it ended: the client's address
-- and user agent, and the HTTP status the API answered.
ALTER TABLE audit_events ADD COLUMN client_ip TEXT;
ALTER TABLE audit_events ADD COLUMN user_agent TEXT;
ALTER TABLE audit_events ADD COLUMN status_code INTEGER;
CREATE INDEX audit_events_request ON audit_events (request_id);
