-- See migrations/postgres/0014_dashboard_layouts.sql.
CREATE TABLE dashboard_layouts (
    id          TEXT    PRIMARY KEY,
    tenant_uuid TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    agent_uuid  TEXT    NOT NULL REFERENCES agents (uuid) ON DELETE CASCADE,
    name        TEXT    NOT NULL,
    is_default  INTEGER NOT NULL DEFAULT 0 CHECK (is_default IN (0, 1)),
    version     INTEGER NOT NULL DEFAULT 1,
    layout      TEXT    NOT NULL CHECK (json_valid(layout)),
    created_by  TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (tenant_uuid, agent_uuid, name)
) STRICT;
CREATE UNIQUE INDEX dashboard_layouts_one_default ON dashboard_layouts (agent_uuid) WHERE is_default = 1;
CREATE INDEX dashboard_layouts_agent_updated ON dashboard_layouts (agent_uuid, updated_at DESC);
