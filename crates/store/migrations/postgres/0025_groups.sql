-- Groups and template access lists (issue 30).
--
-- A group has members (people, or a system actor such as `prebuilds`);
-- `source` says who keeps its membership: `manual` (people, with
-- `abode groups members`) or `oidc` (single sign-on's group sync sets each
-- person's membership at sign-in). `quota_allowance` is for the quotas that
-- follow (0: none). The built-in `Everyone` (id `everyone`) has no member
-- rows: every person is in it.
CREATE TABLE groups (
    id              TEXT COLLATE "C" PRIMARY KEY,
    name            TEXT COLLATE "C" NOT NULL UNIQUE,
    display_name    TEXT NOT NULL DEFAULT '',
    source          TEXT NOT NULL DEFAULT 'manual',
    quota_allowance BIGINT NOT NULL DEFAULT 0,
    created_at      BIGINT NOT NULL
);

CREATE TABLE group_members (
    group_id TEXT COLLATE "C" NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    user_id  TEXT COLLATE "C" NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    PRIMARY KEY (group_id, user_id)
);
CREATE INDEX group_members_by_user ON group_members (user_id);

INSERT INTO groups (id, name, display_name, source, quota_allowance, created_at)
VALUES ('everyone', 'Everyone', 'Everyone', 'manual', 0, 0);

-- A template's access list: each entry names one user or one group and a
-- role, `use` (see it, create workspaces from it) or `admin` (also push and
-- activate its versions and edit this list).
CREATE TABLE template_access (
    template_id TEXT COLLATE "C" NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
    user_id     TEXT COLLATE "C" REFERENCES users (id) ON DELETE CASCADE,
    group_id    TEXT COLLATE "C" REFERENCES groups (id) ON DELETE CASCADE,
    role        TEXT NOT NULL,
    CHECK ((user_id IS NULL) <> (group_id IS NULL))
);
CREATE UNIQUE INDEX template_access_user ON template_access (template_id, user_id)
    WHERE user_id IS NOT NULL;
CREATE UNIQUE INDEX template_access_group ON template_access (template_id, group_id)
    WHERE group_id IS NOT NULL;
CREATE INDEX template_access_by_group ON template_access (group_id);
CREATE INDEX template_access_by_user ON template_access (user_id);

-- Templates that existed before access lists stay usable by everyone.
INSERT INTO template_access (template_id, group_id, role)
SELECT id, 'everyone', 'use' FROM templates;
