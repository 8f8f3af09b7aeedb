-- The tenant event log's copies of agents' state reports
-- (docs/events.md, "State snapshots"). agent_reports keeps only the latest
-- report; a row is added here only when what an agent reports changed
-- (hash is over the report without its per-report counters and times),
-- so an agent reporting every few seconds the same state adds nothing.
-- Rows are bounded per agent by the writer and by age by the pruning
-- service (api.events_retention).
CREATE TABLE agent_state_snapshots (
    id          bigserial   PRIMARY KEY,
    tenant_uuid uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    agent_uuid  uuid        NOT NULL REFERENCES agents (uuid) ON DELETE CASCADE,
    reported_at timestamptz NOT NULL,
    hash        text        NOT NULL,
    report      jsonb       NOT NULL
);
CREATE INDEX agent_state_snapshots_agent ON agent_state_snapshots (agent_uuid, reported_at DESC, id DESC);
CREATE INDEX agent_state_snapshots_tenant ON agent_state_snapshots (tenant_uuid, reported_at DESC, id DESC);

-- The event log reads audit records of one agent (target, or the agent
-- named in the detail) and prunes them by age.
CREATE INDEX audit_events_tenant_target ON audit_events (tenant_uuid, target, at DESC);
CREATE INDEX audit_events_at ON audit_events (at);
