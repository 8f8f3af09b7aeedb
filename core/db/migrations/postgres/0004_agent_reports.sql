-- Each agent's latest state report and latest system metrics, one row per
-- tenant, agent and kind. The Cloud API replaces a row only with a report
-- that is not older, so redeliveries and replays never roll it back.
CREATE TABLE agent_reports (
    tenant_id   text        NOT NULL,
    agent_uuid  uuid        NOT NULL,
    kind        text        NOT NULL CHECK (kind IN ('state', 'metrics')),
    report      jsonb       NOT NULL,
    reported_at timestamptz NOT NULL,
    received_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, agent_uuid, kind)
);
