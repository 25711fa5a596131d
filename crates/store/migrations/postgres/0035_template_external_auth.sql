-- External auth (issue 34): the providers a template version asks its
-- workspaces' owners to have linked (`data "abode_external_auth"`), read
-- from its import plan at push; a create, start or claim for an owner who
-- has not linked a required one is refused before any plan.
CREATE TABLE template_version_external_auth (
    template_version_id TEXT NOT NULL REFERENCES template_versions (id) ON DELETE CASCADE,
    provider_id         TEXT NOT NULL,
    optional            BOOLEAN NOT NULL,
    PRIMARY KEY (template_version_id, provider_id)
);
