-- Log lines agents ship to the cloud, read per agent over a time range.
CREATE TABLE agent_logs (
    id         bigserial   PRIMARY KEY,
    tenant_id  text,
    agent_uuid uuid,
    time       timestamptz NOT NULL,
    level      text,
    message    text,
    component  text,
    source     text,
    data       jsonb
);

CREATE INDEX agent_logs_agent_time_idx ON agent_logs (agent_uuid, time);
