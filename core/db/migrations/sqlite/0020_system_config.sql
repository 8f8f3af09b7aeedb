-- See migrations/postgres/0020_system_config.sql.
CREATE TABLE system_config (
    key        TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by TEXT    NOT NULL DEFAULT ''
) STRICT;
