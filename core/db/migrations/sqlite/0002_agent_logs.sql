-- Log lines agents ship to the cloud, read per agent over a time range.
-- id is the rowid (no AUTOINCREMENT: its sequence table costs a write per
-- insert); time is Unix microseconds; data is JSON text.
CREATE TABLE agent_logs (
    id         INTEGER PRIMARY KEY,
    tenant_id  TEXT,
    agent_uuid TEXT CHECK (agent_uuid IS NULL OR (length(agent_uuid) = 36 AND agent_uuid = lower(agent_uuid))),
    time       INTEGER NOT NULL,
    level      TEXT,
    message    TEXT,
    component  TEXT,
    source     TEXT,
    data       TEXT CHECK (data IS NULL OR json_valid(data))
) STRICT;

CREATE INDEX agent_logs_agent_time_idx ON agent_logs (agent_uuid, time);
