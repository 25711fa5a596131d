-- Prebuilt workspaces (issue 12).
--
-- A template version keeps the presets its template declares
-- (`abode_workspace_preset`), read at push from the template-import plan, as
-- a JSON array of abode_contract::presets::PresetDefinition. NULL: a version
-- pushed before this migration, whose presets were never read (it offers
-- none; push it again to read them).
ALTER TABLE template_versions ADD COLUMN presets TEXT;

-- The preset a workspace was created with (NULL: none). Prebuilt workspaces
-- always have one: it is the pool they belong to, and what a claim matches.
ALTER TABLE workspaces ADD COLUMN preset_name TEXT;
-- The reconciliation snapshot and a claim read a version's prebuilt
-- workspaces by owner (the `prebuilds` system user), version and preset.
CREATE INDEX workspaces_prebuild_pool
    ON workspaces (owner_id, template_version_id, preset_name) WHERE NOT deleted;

-- Settings of the whole platform that owners change at run time, by name
-- (`prebuilds.paused`: 'true' or 'false').
CREATE TABLE platform_settings (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- Work that one server at a time does (the prebuilds reconciliation): the
-- server holding the unexpired lease of that name does it. Times are Unix ms.
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);

-- A pool's failure history: the prebuild builds (started by the `prebuilds`
-- system user), whichever workspace they belong to now.
CREATE INDEX builds_prebuild ON builds (initiator_id, template_version_id) WHERE reason = 'prebuild';

-- What an abode_agent runs when the prebuilt workspace it serves is claimed
-- (`claim_script`), handed to the agent like its startup script.
ALTER TABLE agents ADD COLUMN claim_script TEXT;
