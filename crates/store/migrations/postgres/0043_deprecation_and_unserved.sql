-- Template deprecation and builds no provisioner can take (issue 50, items 3
-- and 4).
-- A deprecated template refuses new workspaces with `deprecation_message`
-- (and names `deprecation_replacement`, a template's name, if given); its
-- existing workspaces keep working. NULL message: not deprecated.
ALTER TABLE templates ADD COLUMN deprecation_message TEXT;
ALTER TABLE templates ADD COLUMN deprecation_replacement TEXT;
ALTER TABLE templates ADD COLUMN deprecated_at BIGINT;

-- Why a queued job waits: no connected provisioner offers its version's
-- tags. Written (and its log line) once whichever server looks, cleared
-- when a provisioner that offers them is connected.
ALTER TABLE jobs ADD COLUMN unserved TEXT;
