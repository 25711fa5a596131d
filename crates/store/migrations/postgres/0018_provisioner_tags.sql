-- Routing by tags (issue 15): a template version carries the provisioner
-- tags its builds need (`abode templates push --provisioner-tag k=v`), one
-- row per `key=value`; a provisioner takes a job only when every tag of the
-- job's version is one of its own (an untagged version's jobs go to any).
CREATE TABLE template_version_tags (
    template_version_id TEXT COLLATE "C" NOT NULL REFERENCES template_versions (id) ON DELETE CASCADE,
    tag                 TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (template_version_id, tag)
);
