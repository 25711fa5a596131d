-- Snapshots before a confirmed destroy (issue 47): a retained record of
-- kind `snapshot` is an archive of a volume's files the provisioner made
-- before it applied a confirmed plan that destroyed or replaced the volume
-- (the record of what a delete retained is of kind `resource`). `archive`
-- is the archive's file name in the server's snapshots dir, and
-- `archive_bytes` its size.
ALTER TABLE retained_resources ADD COLUMN kind TEXT NOT NULL DEFAULT 'resource';
ALTER TABLE retained_resources ADD COLUMN archive TEXT;
ALTER TABLE retained_resources ADD COLUMN archive_bytes BIGINT;
