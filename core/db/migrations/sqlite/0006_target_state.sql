-- See migrations/postgres/0006_target_state.sql.
CREATE TABLE agent_target_state (
    agent_uuid  TEXT    PRIMARY KEY REFERENCES agents (uuid) ON DELETE CASCADE,
    tenant_uuid TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    state       TEXT    NOT NULL CHECK (json_valid(state)),
    version     INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    updated_by  TEXT    NOT NULL DEFAULT ''
);
