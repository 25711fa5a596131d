-- The lifecycle scheduler (issue 13). Durations and times are milliseconds
-- (times: Unix ms); a duration of 0 turns its rule off.
--
-- A template's policy, set by template admins (`abode templates edit`).
ALTER TABLE templates ADD COLUMN default_ttl_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE templates ADD COLUMN activity_bump_ms BIGINT NOT NULL DEFAULT 3600000;
ALTER TABLE templates ADD COLUMN max_ttl_ms BIGINT NOT NULL DEFAULT 0;
-- Days autostart may run, as `mon,tue,...` (abode_schedule::Weekdays).
ALTER TABLE templates ADD COLUMN autostart_days TEXT COLLATE "C" NOT NULL DEFAULT 'mon,tue,wed,thu,fri,sat,sun';
ALTER TABLE templates ADD COLUMN allow_user_autostart BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE templates ADD COLUMN allow_user_autostop BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE templates ADD COLUMN failure_ttl_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE templates ADD COLUMN dormancy_threshold_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE templates ADD COLUMN dormancy_auto_deletion_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE templates ADD COLUMN require_active_version BOOLEAN NOT NULL DEFAULT FALSE;

-- A workspace's schedule, set by its owner (`abode schedule`): autostart as
-- a five-field cron in an IANA time zone (both NULL: none), and its own
-- autostop ttl (NULL: the template's default).
ALTER TABLE workspaces ADD COLUMN autostart_cron TEXT COLLATE "C";
ALTER TABLE workspaces ADD COLUMN autostart_timezone TEXT COLLATE "C";
ALTER TABLE workspaces ADD COLUMN ttl_ms BIGINT;
-- When the running workspace is stopped (bumped by activity, never past
-- max_deadline); both NULL: no autostop.
ALTER TABLE workspaces ADD COLUMN deadline BIGINT;
ALTER TABLE workspaces ADD COLUMN max_deadline BIGINT;
-- The last time its owner or its agent used it (NULL: never since created).
ALTER TABLE workspaces ADD COLUMN last_used_at BIGINT;
-- Dormancy: since when, when it is deleted, and when its owner was told.
ALTER TABLE workspaces ADD COLUMN dormant_at BIGINT;
ALTER TABLE workspaces ADD COLUMN deleting_at BIGINT;
ALTER TABLE workspaces ADD COLUMN deletion_notified_at BIGINT;
