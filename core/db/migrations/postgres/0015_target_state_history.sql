-- Every committed version of each agent's own target-state document
-- (docs/target-state.md, "History"), written in the transaction that
-- commits the version and bounded to the agent's last 100 versions.
-- Documents hold secret references only, never values: the target-state
-- routes refuse a secret value, so nothing resolved is ever kept here.
-- size is the document's length in bytes as it was written, so a list
-- of versions need not read the documents.
CREATE TABLE agent_target_state_history (
    agent_uuid  uuid        NOT NULL REFERENCES agents (uuid) ON DELETE CASCADE,
    tenant_uuid uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    version     bigint      NOT NULL,
    state       jsonb       NOT NULL,
    size        integer     NOT NULL,
    updated_at  timestamptz NOT NULL,
    updated_by  text        NOT NULL DEFAULT '',
    PRIMARY KEY (agent_uuid, version)
);

-- The versions committed before history was kept start it.
INSERT INTO agent_target_state_history (agent_uuid, tenant_uuid, version, state, size, updated_at, updated_by)
SELECT agent_uuid, tenant_uuid, version, state, octet_length(state::text), updated_at, updated_by FROM agent_target_state;
