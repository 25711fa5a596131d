-- Notifications (issue 11): the outbox. A message is written in the
-- transaction of the change that causes it, one row per recipient and
-- channel, and delivered at least once by the dispatcher, which claims due
-- rows with a lease. `inbox` rows are delivered by being stored (status
-- `sent` from the start) and carry the read flag. Times are Unix ms.
CREATE TABLE notifications (
    id               TEXT PRIMARY KEY,
    kind             TEXT NOT NULL,
    recipient_id     TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    channel          TEXT NOT NULL,
    payload          TEXT NOT NULL,
    -- Identical messages to one person and channel: at most one a day.
    dedupe_key       TEXT NOT NULL UNIQUE,
    status           TEXT NOT NULL,
    attempts         BIGINT NOT NULL DEFAULT 0,
    next_attempt_at  BIGINT NOT NULL,
    lease_owner      TEXT,
    lease_expires_at BIGINT,
    last_error       TEXT,
    read_at          BIGINT,
    created_at       BIGINT NOT NULL,
    sent_at          BIGINT
);
-- The dispatcher's claim: due rows by their time.
CREATE INDEX notifications_due ON notifications (status, next_attempt_at);
-- A person's inbox, newest first.
CREATE INDEX notifications_inbox ON notifications (recipient_id, channel, created_at, id);

-- A person's opt-outs: a kind they disabled reaches them on no channel...
CREATE TABLE notification_opt_outs (
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind    TEXT NOT NULL,
    PRIMARY KEY (user_id, kind)
);
-- ...unless the owners made that kind mandatory.
CREATE TABLE notification_mandatory_kinds (
    kind TEXT PRIMARY KEY
);
