-- Rename and restart through the guard (issue 33).
--
-- A rename is a build of the workspace's current transition planned under
-- the new name: `rename_to` is that name. The workspace takes it only when
-- the build succeeds, in the statement that records its end; a failed,
-- canceled, held-and-expired or recovered-as-failed build leaves the old one.
ALTER TABLE builds ADD COLUMN rename_to TEXT;

-- A restart's stop: once it succeeds, a start of the workspace is
-- requested. Kept on the row, so that a server that died between the two
-- still queues the start when it comes back (`recovery.rs`).
ALTER TABLE builds ADD COLUMN then_start BOOLEAN NOT NULL DEFAULT FALSE;
