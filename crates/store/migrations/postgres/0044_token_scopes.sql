-- Scoped API tokens (issue 49): what a token may be used for, in its
-- stored text form (`abode_store::TokenScope`: `all`, or `;`-separated
-- grants such as `read;template:push=web,api;workspace:build=ID`).
-- Sessions and every token made before scopes existed hold `all`.
ALTER TABLE api_tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'all';
