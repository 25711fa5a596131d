-- Prebuild pools under the prebuilds actor's budget (issue 31).
--
-- What the plan of a build refused by quota would have cost a day. Its
-- daily_cost stays NULL (a refused build reserves nothing); the prebuild
-- reconciliation reads this as its pool's last known cost, so that a pool
-- whose first prebuild was refused knows what the next one would cost.
ALTER TABLE builds ADD COLUMN refused_cost INTEGER;

-- A preset's pool held below its desired count by the prebuilds budget:
-- one row per template and preset while the episode lasts. Written with
-- the notice to template admins (preset_quota_limited) and removed with
-- the recovery notice (preset_quota_recovered), each in one transaction,
-- so each is sent once per episode whichever server reconciles.
CREATE TABLE prebuild_quota_episodes (
    template_id TEXT NOT NULL,
    preset_name TEXT NOT NULL,
    since       INTEGER NOT NULL,
    PRIMARY KEY (template_id, preset_name)
);
