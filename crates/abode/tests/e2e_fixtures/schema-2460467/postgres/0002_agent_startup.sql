-- The agent runs its startup script: the server keeps what the start build
-- declared for each abode_agent (script, directory, environment as a JSON
-- object) to hand it to the agent, and the script's exit status when it
-- failed (lifecycle 'start_error'). Same as the SQLite migration 0003.
ALTER TABLE agents ADD COLUMN startup_script TEXT;
ALTER TABLE agents ADD COLUMN dir TEXT;
ALTER TABLE agents ADD COLUMN env TEXT NOT NULL DEFAULT '{}';
ALTER TABLE agents ADD COLUMN exit_status BIGINT;
