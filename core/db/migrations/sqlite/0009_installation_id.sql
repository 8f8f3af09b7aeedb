-- See migrations/postgres/0009_installation_id.sql.
CREATE TABLE installation_identity (
    singleton INTEGER PRIMARY KEY DEFAULT 1 CHECK (singleton = 1),
    id        TEXT    NOT NULL
);
INSERT INTO installation_identity (id) VALUES (lower(hex(randomblob(16))));
