-- See migrations/postgres/0009_installation_id.sql.
CREATE TABLE installation_identity (
    singleton        INTEGER PRIMARY KEY DEFAULT 1 CHECK (singleton = 1),
    id               TEXT    NOT NULL,
    legacy_client_id INTEGER NOT NULL CHECK (legacy_client_id IN (0, 1))
);
INSERT INTO installation_identity (id, legacy_client_id)
VALUES (lower(hex(randomblob(16))),
        EXISTS (SELECT 1 FROM tenants) OR EXISTS (SELECT 1 FROM readings));
