-- One row per sample; see migrations/postgres/0001_readings.sql for the key.
-- time is Unix microseconds (timestamptz's resolution), agent_uuid canonical
-- lowercase text. STRICT refuses a value of the wrong type (a time.Time
-- stored as text would sort wrongly); WITHOUT ROWID clusters rows by the key,
-- so a range scan of one metric reads neighbouring pages.
CREATE TABLE readings (
    time        INTEGER NOT NULL,
    agent_uuid  TEXT    NOT NULL CHECK (length(agent_uuid) = 36 AND agent_uuid = lower(agent_uuid)),
    metric_name TEXT    NOT NULL,
    value       REAL,
    protocol    TEXT,
    unit        TEXT,
    quality     TEXT,
    device_name TEXT,
    tenant_id   TEXT,
    PRIMARY KEY (agent_uuid, metric_name, time)
) STRICT, WITHOUT ROWID;
