-- See migrations/postgres/0010_target_secrets.sql.
CREATE TABLE target_secrets (
    tenant_uuid TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    scope       TEXT    NOT NULL,
    agent_uuid  TEXT    REFERENCES agents (uuid) ON DELETE CASCADE,
    name        TEXT    NOT NULL,
    value       TEXT    NOT NULL,
    updated_at  INTEGER NOT NULL,
    updated_by  TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (tenant_uuid, scope, name)
);
