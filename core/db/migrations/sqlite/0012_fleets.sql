-- See migrations/postgres/0012_fleets.sql.
CREATE TABLE fleets (
    id               TEXT    PRIMARY KEY,
    tenant_uuid      TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    name             TEXT    NOT NULL,
    description      TEXT    NOT NULL DEFAULT '',
    template         TEXT    NOT NULL DEFAULT '{}',
    template_version INTEGER NOT NULL DEFAULT 1,
    run_state        TEXT    NOT NULL DEFAULT 'running' CHECK (run_state IN ('running', 'stopped')),
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (tenant_uuid, name)
) STRICT;

CREATE TABLE fleet_usage_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_uuid TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    fleet_id    TEXT    NOT NULL,
    at          INTEGER NOT NULL,
    kind        TEXT    NOT NULL,
    actor       TEXT    NOT NULL DEFAULT '',
    detail      TEXT    NOT NULL DEFAULT '{}'
) STRICT;
CREATE INDEX fleet_usage_events_fleet ON fleet_usage_events (fleet_id, at DESC, id DESC);

ALTER TABLE agents ADD COLUMN fleet_id TEXT REFERENCES fleets (id) ON DELETE SET NULL;
CREATE INDEX agents_fleet ON agents (fleet_id);
ALTER TABLE provisioning_keys ADD COLUMN fleet_id TEXT REFERENCES fleets (id) ON DELETE SET NULL;

-- A version-4 UUID from random bytes.
INSERT INTO fleets (id, tenant_uuid, name, created_at, updated_at)
SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' ||
             substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
       tenant_uuid, fleet, CAST(strftime('%s', 'now') AS INTEGER) * 1000000, CAST(strftime('%s', 'now') AS INTEGER) * 1000000
FROM (
    SELECT tenant_uuid, fleet FROM agents WHERE fleet <> ''
    UNION
    SELECT tenant_uuid, fleet FROM provisioning_keys WHERE fleet <> ''
);
UPDATE agents SET fleet_id = (SELECT f.id FROM fleets f WHERE f.tenant_uuid = agents.tenant_uuid AND f.name = agents.fleet)
    WHERE fleet <> '';
UPDATE provisioning_keys SET fleet_id = (SELECT f.id FROM fleets f WHERE f.tenant_uuid = provisioning_keys.tenant_uuid AND f.name = provisioning_keys.fleet)
    WHERE fleet <> '';

ALTER TABLE agents DROP COLUMN fleet;
ALTER TABLE provisioning_keys DROP COLUMN fleet;
