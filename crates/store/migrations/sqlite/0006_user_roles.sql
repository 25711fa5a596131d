-- Roles become a set per user: one row per (user, role), so that a new role
-- is new rows, never a table rebuild. That is also why `role` has no CHECK
-- (changing a CHECK on SQLite means rebuilding the table): the store parses
-- every value it reads into its Role enum and fails the read, naming the
-- value, on one it does not know.
--
-- Every existing user keeps the role they had and also holds `member` (before
-- roles were a set, every person could have workspaces of their own; owners
-- and template-admins keep that). The spellings stored so far are exactly
-- `owner`, `template-admin` and `member` (the CHECK of 0001), which are also
-- the new names.
--
-- users.role stays (append-only schema). The server no longer reads it for
-- any decision; it keeps writing the nearest old name (owner, template-admin,
-- else member) so that the column stays truthful for anyone reading the table.

CREATE TABLE user_roles (
    user_id TEXT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role    TEXT NOT NULL,
    PRIMARY KEY (user_id, role)
);

-- "How many owners are left" is answered from the index, not a scan.
CREATE INDEX user_roles_role ON user_roles (role, user_id);

INSERT INTO user_roles (user_id, role) SELECT id, role FROM users;
INSERT INTO user_roles (user_id, role) SELECT id, 'member' FROM users WHERE role <> 'member';
