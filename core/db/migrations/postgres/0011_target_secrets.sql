-- Secret values a target-state document refers to by name
-- ({"secretRef": "name"}, docs/target-state.md). scope is '' for a
-- tenant-wide secret, else the agent's UUID (agent_uuid, so deleting the
-- agent deletes its secrets). Values are write-only: no route returns
-- them; only the agent's GET /device/:uuid/state carries them.
CREATE TABLE target_secrets (
    tenant_uuid uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    scope       text        NOT NULL,
    agent_uuid  uuid        REFERENCES agents (uuid) ON DELETE CASCADE,
    name        text        NOT NULL,
    value       text        NOT NULL,
    updated_at  timestamptz NOT NULL,
    updated_by  text        NOT NULL DEFAULT '',
    PRIMARY KEY (tenant_uuid, scope, name)
);
