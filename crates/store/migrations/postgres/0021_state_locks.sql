-- The fence of each workspace's Terraform state (issue 26). Abode is the
-- state backend of every build's Terraform; a build takes its workspace's
-- row when its job is claimed, with a secret only that run's Terraform
-- knows (kept here as its SHA-256), and Terraform's own lock is held under
-- it. A state write or a Terraform lock whose secret is not the row's is
-- refused. The row goes when the run reports that its Terraform ended, or
-- when a person unlocks the workspace; a build failed because its holder
-- stopped renewing its lease keeps it, marked lost, while that holder could
-- still be running. New builds of a workspace wait while another build's
-- row is there.
CREATE TABLE state_locks (
    workspace_id        TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    build_id            TEXT COLLATE "C" NOT NULL,
    holder              TEXT COLLATE "C" NOT NULL,
    secret_hash         TEXT COLLATE "C" NOT NULL,
    terraform_lock_id   TEXT COLLATE "C",
    terraform_lock_info TEXT,
    taken_at            BIGINT NOT NULL,
    lost_at             BIGINT
);
CREATE INDEX state_locks_by_build ON state_locks (build_id);

-- Which state a saved plan was made against: 'local' (a plan held before
-- Abode was the state backend, applied with the stored state laid out in
-- the work dir as it was planned) or 'abode' (the state backend).
ALTER TABLE saved_plans ADD COLUMN state_backend TEXT NOT NULL DEFAULT 'local';
