-- Dashboard layouts (docs/dashboards.md): the grids of widgets the web
-- console shows for an agent. Follows 0013_jobs.
--
-- layout is the schema-versioned document the API validated; version
-- counts its updates for optimistic concurrency. A layout goes with its
-- agent. The partial index keeps one default per agent, the one GET
-- /dashboard-layouts/:deviceUuid answers; (agent_uuid, updated_at) finds
-- the next default when the default is deleted.
CREATE TABLE dashboard_layouts (
    id          uuid        PRIMARY KEY,
    tenant_uuid uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    agent_uuid  uuid        NOT NULL REFERENCES agents (uuid) ON DELETE CASCADE,
    name        text        NOT NULL,
    is_default  boolean     NOT NULL DEFAULT false,
    version     bigint      NOT NULL DEFAULT 1,
    layout      jsonb       NOT NULL,
    created_by  text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    UNIQUE (tenant_uuid, agent_uuid, name)
);
CREATE UNIQUE INDEX dashboard_layouts_one_default ON dashboard_layouts (agent_uuid) WHERE is_default;
CREATE INDEX dashboard_layouts_agent_updated ON dashboard_layouts (agent_uuid, updated_at DESC);
