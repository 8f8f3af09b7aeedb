-- See migrations/postgres/0004_agent_reports.sql. Times are Unix
-- microseconds; report is JSON text.
CREATE TABLE agent_reports (
    tenant_id   TEXT    NOT NULL,
    agent_uuid  TEXT    NOT NULL CHECK (length(agent_uuid) = 36 AND agent_uuid = lower(agent_uuid)),
    kind        TEXT    NOT NULL CHECK (kind IN ('state', 'metrics')),
    report      TEXT    NOT NULL CHECK (json_valid(report)),
    reported_at INTEGER NOT NULL,
    received_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, agent_uuid, kind)
) STRICT, WITHOUT ROWID;
