-- See migrations/postgres/0010_agent_status.sql. status_changed_at is Unix
-- microseconds.
ALTER TABLE agents ADD COLUMN status TEXT NOT NULL DEFAULT 'never-seen';
ALTER TABLE agents ADD COLUMN status_changed_at INTEGER;
UPDATE agents SET status = 'disabled' WHERE NOT active;
