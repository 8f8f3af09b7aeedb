-- Fleets (docs/fleets-and-jobs.md): named groups of agents that share a
-- target-state template and a run state. An agent is in at most one
-- fleet (agents.fleet_id); a provisioning key may name the fleet its
-- agents join. The free-text fleet columns of agents and provisioning
-- keys become fleet records, one per tenant and distinct text.
CREATE TABLE fleets (
    id               uuid        PRIMARY KEY,
    tenant_uuid      uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    name             text        NOT NULL,
    description      text        NOT NULL DEFAULT '',
    template         jsonb       NOT NULL DEFAULT '{}',
    template_version bigint      NOT NULL DEFAULT 1,
    run_state        text        NOT NULL DEFAULT 'running' CHECK (run_state IN ('running', 'stopped')),
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    UNIQUE (tenant_uuid, name)
);

-- The usage history of a fleet. fleet_id has no foreign key: the history
-- outlives the fleet (its "deleted" event is the last one).
CREATE TABLE fleet_usage_events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_uuid uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    fleet_id    uuid        NOT NULL,
    at          timestamptz NOT NULL,
    kind        text        NOT NULL,
    actor       text        NOT NULL DEFAULT '',
    detail      jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX fleet_usage_events_fleet ON fleet_usage_events (fleet_id, at DESC, id DESC);

ALTER TABLE agents ADD COLUMN fleet_id uuid REFERENCES fleets (id) ON DELETE SET NULL;
CREATE INDEX agents_fleet ON agents (fleet_id);
ALTER TABLE provisioning_keys ADD COLUMN fleet_id uuid REFERENCES fleets (id) ON DELETE SET NULL;

INSERT INTO fleets (id, tenant_uuid, name, created_at, updated_at)
SELECT gen_random_uuid(), tenant_uuid, fleet, now(), now() FROM (
    SELECT tenant_uuid, fleet FROM agents WHERE fleet <> ''
    UNION
    SELECT tenant_uuid, fleet FROM provisioning_keys WHERE fleet <> ''
) AS old;
UPDATE agents SET fleet_id = f.id FROM fleets f WHERE f.tenant_uuid = agents.tenant_uuid AND f.name = agents.fleet;
UPDATE provisioning_keys SET fleet_id = f.id FROM fleets f
    WHERE f.tenant_uuid = provisioning_keys.tenant_uuid AND f.name = provisioning_keys.fleet;

-- The name is read through fleet_id from now on.
ALTER TABLE agents DROP COLUMN fleet;
ALTER TABLE provisioning_keys DROP COLUMN fleet;
