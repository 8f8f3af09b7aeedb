-- Anomaly detection in the cloud (docs/anomaly-cloud.md). Follows
-- 0015_target_state_history.
--
-- anomaly_rules are a tenant's detection rules; spec holds the rule's
-- type-specific parameters as the API validated them. A rule scoped to a
-- fleet or an agent goes with it.
CREATE TABLE anomaly_rules (
    id          uuid        PRIMARY KEY,
    tenant_uuid uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    name        text        NOT NULL,
    type        text        NOT NULL,
    severity    text        NOT NULL,
    enabled     boolean     NOT NULL DEFAULT true,
    fleet_id    uuid        REFERENCES fleets (id) ON DELETE CASCADE,
    agent_uuid  uuid        REFERENCES agents (uuid) ON DELETE CASCADE,
    spec        jsonb       NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX anomaly_rules_tenant ON anomaly_rules (tenant_uuid, created_at);

-- One incident per rule firing on one series (agent and metric; agent
-- alone for a correlation rule, whose metric is the conditions' patterns).
-- The partial unique index keeps one open incident per rule and series,
-- whichever replica's evaluator saw the firing first. rule_id is kept
-- when the rule goes (SET NULL), with its name, so history stays readable.
CREATE TABLE anomaly_incidents (
    id           uuid             PRIMARY KEY,
    tenant_uuid  uuid             NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    rule_id      uuid             REFERENCES anomaly_rules (id) ON DELETE SET NULL,
    rule_key     uuid             NOT NULL,
    rule_name    text             NOT NULL,
    rule_type    text             NOT NULL,
    severity     text             NOT NULL,
    agent_uuid   uuid             NOT NULL,
    device_name  text             NOT NULL DEFAULT '',
    metric       text             NOT NULL,
    value        double precision NOT NULL,
    score        double precision NOT NULL,
    peak_score   double precision NOT NULL,
    opened_at    timestamptz      NOT NULL,
    closed_at    timestamptz,
    close_reason text,
    resolved_by  text             NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX anomaly_incidents_one_open ON anomaly_incidents (rule_key, agent_uuid, metric) WHERE closed_at IS NULL;
CREATE INDEX anomaly_incidents_tenant_opened ON anomaly_incidents (tenant_uuid, opened_at DESC);

-- Alert rules tie incidents (and, when asked, the agents' own anomaly
-- alerts) to a notification target. secret signs webhook bodies; the
-- last_* columns are the outcome of the latest delivery.
CREATE TABLE anomaly_alert_rules (
    id                uuid        PRIMARY KEY,
    tenant_uuid       uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    name              text        NOT NULL,
    enabled           boolean     NOT NULL DEFAULT true,
    spec              jsonb       NOT NULL,
    target_type       text        NOT NULL,
    target            text        NOT NULL DEFAULT '',
    secret            text        NOT NULL DEFAULT '',
    last_status       text        NOT NULL DEFAULT '',
    last_error        text        NOT NULL DEFAULT '',
    last_attempts     integer     NOT NULL DEFAULT 0,
    last_attempt_at   timestamptz,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);
CREATE INDEX anomaly_alert_rules_tenant ON anomaly_alert_rules (tenant_uuid, created_at);

-- Agent events (docs/control-channel.md, section Events): the key makes a
-- redelivered event a no-op. Retention is bounded by the evaluator's
-- pruning (docs/anomaly-cloud.md, section Agent events).
CREATE TABLE agent_events (
    tenant_uuid uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    agent_uuid  uuid        NOT NULL REFERENCES agents (uuid) ON DELETE CASCADE,
    kind        text        NOT NULL,
    event_id    text        NOT NULL,
    severity    text        NOT NULL,
    occurred_at timestamptz NOT NULL,
    received_at timestamptz NOT NULL,
    data        jsonb       NOT NULL,
    PRIMARY KEY (tenant_uuid, agent_uuid, kind, event_id)
);
CREATE INDEX agent_events_agent_time ON agent_events (agent_uuid, occurred_at DESC);
CREATE INDEX agent_events_tenant_kind_time ON agent_events (tenant_uuid, kind, occurred_at DESC);
CREATE INDEX agent_events_received ON agent_events (received_at);
