-- The state each agent should converge to, set by users and polled by the
-- agent (GET /device/:uuid/state). version increases with every change
-- and is the ETag, so an unchanged state costs the agent a 304.
CREATE TABLE agent_target_state (
    agent_uuid  uuid        PRIMARY KEY REFERENCES agents (uuid) ON DELETE CASCADE,
    tenant_uuid uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    state       jsonb       NOT NULL,
    version     bigint      NOT NULL,
    updated_at  timestamptz NOT NULL,
    updated_by  text        NOT NULL DEFAULT ''
);
