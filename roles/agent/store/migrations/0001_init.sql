-- The agent's local state: its identity, its protocol endpoints, its
-- settings and the admin UI's users and sessions. Times are Unix
-- milliseconds.
CREATE TABLE agent_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE endpoints (
    uuid       TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    protocol   TEXT NOT NULL,
    enabled    INTEGER NOT NULL,
    body       TEXT NOT NULL, -- the endpoint object as JSON
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX endpoints_protocol ON endpoints (protocol);

CREATE TABLE settings (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    body       TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE admin_users (
    username      TEXT PRIMARY KEY,
    password_hash TEXT NOT NULL,
    is_active     INTEGER NOT NULL DEFAULT 1,
    is_superuser  INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

-- Sessions are kept by the SHA-256 of their id, so a copy of the database
-- does not hand out live cookies.
CREATE TABLE admin_sessions (
    id_hash    TEXT PRIMARY KEY,
    username   TEXT NOT NULL REFERENCES admin_users (username) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX admin_sessions_username ON admin_sessions (username);
CREATE INDEX admin_sessions_expires ON admin_sessions (expires_at);
