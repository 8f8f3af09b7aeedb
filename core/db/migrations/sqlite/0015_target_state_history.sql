-- See migrations/postgres/0015_target_state_history.sql.
CREATE TABLE agent_target_state_history (
    agent_uuid  TEXT    NOT NULL REFERENCES agents (uuid) ON DELETE CASCADE,
    tenant_uuid TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    version     INTEGER NOT NULL,
    state       TEXT    NOT NULL CHECK (json_valid(state)),
    size        INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    updated_by  TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (agent_uuid, version)
) STRICT, WITHOUT ROWID;

INSERT INTO agent_target_state_history (agent_uuid, tenant_uuid, version, state, size, updated_at, updated_by)
SELECT agent_uuid, tenant_uuid, version, state, length(CAST(state AS BLOB)), updated_at, updated_by FROM agent_target_state;
