-- See migrations/postgres/0018_agent_state_snapshots.sql.
CREATE TABLE agent_state_snapshots (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_uuid TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    agent_uuid  TEXT    NOT NULL REFERENCES agents (uuid) ON DELETE CASCADE,
    reported_at INTEGER NOT NULL,
    hash        TEXT    NOT NULL,
    report      TEXT    NOT NULL CHECK (json_valid(report))
) STRICT;
CREATE INDEX agent_state_snapshots_agent ON agent_state_snapshots (agent_uuid, reported_at DESC, id DESC);
CREATE INDEX agent_state_snapshots_tenant ON agent_state_snapshots (tenant_uuid, reported_at DESC, id DESC);

CREATE INDEX audit_events_tenant_target ON audit_events (tenant_uuid, target, at DESC);
CREATE INDEX audit_events_at ON audit_events (at);
