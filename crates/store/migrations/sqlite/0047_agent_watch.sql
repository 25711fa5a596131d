-- Live metadata and resource monitors (issue 48, items 3 and 5): what an
-- agent watches (a JSON object: its metadata blocks, its memory threshold
-- and volume monitors), NULL when nothing. The values it reports stay in
-- the receiving server's memory, never here.
ALTER TABLE agents ADD COLUMN watch TEXT;
