-- See migrations/postgres/0007_broker_users.sql.
CREATE TABLE broker_users (
    username      TEXT    PRIMARY KEY,
    tenant_uuid   TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    password_hash TEXT    NOT NULL,
    description   TEXT    NOT NULL DEFAULT '',
    created_by    TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX broker_users_tenant ON broker_users (tenant_uuid, username);

CREATE TABLE broker_acl (
    username   TEXT    NOT NULL REFERENCES broker_users (username) ON DELETE CASCADE,
    rule_index INTEGER NOT NULL,
    pattern    TEXT    NOT NULL,
    publish    INTEGER NOT NULL CHECK (publish IN (0, 1)),
    subscribe  INTEGER NOT NULL CHECK (subscribe IN (0, 1)),
    PRIMARY KEY (username, rule_index),
    CHECK (publish OR subscribe)
);
