-- See migrations/postgres/0016_anomaly.sql.
CREATE TABLE anomaly_rules (
    id          TEXT    PRIMARY KEY,
    tenant_uuid TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    name        TEXT    NOT NULL,
    type        TEXT    NOT NULL,
    severity    TEXT    NOT NULL,
    enabled     INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    fleet_id    TEXT    REFERENCES fleets (id) ON DELETE CASCADE,
    agent_uuid  TEXT    REFERENCES agents (uuid) ON DELETE CASCADE,
    spec        TEXT    NOT NULL CHECK (json_valid(spec)),
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX anomaly_rules_tenant ON anomaly_rules (tenant_uuid, created_at);

CREATE TABLE anomaly_incidents (
    id           TEXT    PRIMARY KEY,
    tenant_uuid  TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    rule_id      TEXT    REFERENCES anomaly_rules (id) ON DELETE SET NULL,
    rule_key     TEXT    NOT NULL,
    rule_name    TEXT    NOT NULL,
    rule_type    TEXT    NOT NULL,
    severity     TEXT    NOT NULL,
    agent_uuid   TEXT    NOT NULL,
    device_name  TEXT    NOT NULL DEFAULT '',
    metric       TEXT    NOT NULL,
    value        REAL    NOT NULL,
    score        REAL    NOT NULL,
    peak_score   REAL    NOT NULL,
    opened_at    INTEGER NOT NULL,
    closed_at    INTEGER,
    close_reason TEXT,
    resolved_by  TEXT    NOT NULL DEFAULT ''
) STRICT;
CREATE UNIQUE INDEX anomaly_incidents_one_open ON anomaly_incidents (rule_key, agent_uuid, metric) WHERE closed_at IS NULL;
CREATE INDEX anomaly_incidents_tenant_opened ON anomaly_incidents (tenant_uuid, opened_at DESC);

CREATE TABLE anomaly_alert_rules (
    id                TEXT    PRIMARY KEY,
    tenant_uuid       TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    name              TEXT    NOT NULL,
    enabled           INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    spec              TEXT    NOT NULL CHECK (json_valid(spec)),
    target_type       TEXT    NOT NULL,
    target            TEXT    NOT NULL DEFAULT '',
    secret            TEXT    NOT NULL DEFAULT '',
    last_status       TEXT    NOT NULL DEFAULT '',
    last_error        TEXT    NOT NULL DEFAULT '',
    last_attempts     INTEGER NOT NULL DEFAULT 0,
    last_attempt_at   INTEGER,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;
CREATE INDEX anomaly_alert_rules_tenant ON anomaly_alert_rules (tenant_uuid, created_at);

CREATE TABLE agent_events (
    tenant_uuid TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    agent_uuid  TEXT    NOT NULL REFERENCES agents (uuid) ON DELETE CASCADE,
    kind        TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    severity    TEXT    NOT NULL,
    occurred_at INTEGER NOT NULL,
    received_at INTEGER NOT NULL,
    data        TEXT    NOT NULL CHECK (json_valid(data)),
    PRIMARY KEY (tenant_uuid, agent_uuid, kind, event_id)
) STRICT;
CREATE INDEX agent_events_agent_time ON agent_events (agent_uuid, occurred_at DESC);
CREATE INDEX agent_events_tenant_kind_time ON agent_events (tenant_uuid, kind, occurred_at DESC);
CREATE INDEX agent_events_received ON agent_events (received_at);
