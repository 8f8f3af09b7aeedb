-- One row per sample. The key makes a resent sample a no-op under
-- ON CONFLICT DO NOTHING, and leads with agent and metric because queries
-- ask for one agent's metric over a time range. value is nullable: a BAD
-- read is stored with its quality and no value. Migrate turns this table into
-- a TimescaleDB hypertable when the extension is available.
CREATE TABLE readings (
    time        timestamptz      NOT NULL,
    agent_uuid  uuid             NOT NULL,
    metric_name text             NOT NULL,
    value       double precision,
    protocol    text,
    unit        text,
    quality     text,
    device_name text,
    tenant_id   text,
    PRIMARY KEY (agent_uuid, metric_name, time)
);
