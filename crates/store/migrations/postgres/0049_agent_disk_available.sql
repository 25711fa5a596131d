-- What the agent's heartbeat says is available on its home volume: the
-- workspace's disk percent is then `df`'s (used of used + available), the
-- one its disk-full warnings are told at.
ALTER TABLE agents ADD COLUMN disk_available_bytes BIGINT;
