-- The agent status the Cloud API last announced (online, offline,
-- never-seen, disabled). GET /agents derives the status from last_seen at
-- each request; this column only makes each change an event exactly once:
-- every serve-api replica looks for agents whose derived status differs
-- from it, and the conditional UPDATE that moves it from the old value is
-- won by one of them (docs/agents-api.md, section Status events).
-- last_seen was never written before this version, so every agent starts
-- never-seen, or disabled.
ALTER TABLE agents ADD COLUMN status text NOT NULL DEFAULT 'never-seen';
ALTER TABLE agents ADD COLUMN status_changed_at timestamptz;
UPDATE agents SET status = 'disabled' WHERE NOT active;
