-- An ephemeral parameter's value applies to one build only (issue 29): a
-- build keeps the values it ran with (`parameters`) only while it may run;
-- once it ends or is held, it keeps what the workspace keeps
-- (`workspace_parameters`: the same values without the ephemeral ones).
-- The store does this at every end from now on; the builds that ended
-- before forget theirs here.
UPDATE builds SET parameters = workspace_parameters
WHERE workspace_parameters IS NOT NULL
  AND status NOT IN ('pending', 'running');
