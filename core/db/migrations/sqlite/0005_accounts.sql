-- See migrations/postgres/0005_accounts.sql. UUIDs are lowercase hyphenated
-- TEXT, times Unix microseconds, JSON is TEXT, booleans 0 or 1.
-- Accounts, credentials and the agent registry of the Cloud API. Every row
-- that belongs to a tenant carries tenant_uuid, and every query filters on
-- the caller's tenant. Secrets are never stored: only SHA-256 hashes of
-- high-entropy keys and tokens, and argon2id hashes of user passwords.
CREATE TABLE tenants (
    uuid       TEXT        PRIMARY KEY,
    name       TEXT        NOT NULL,
    created_at INTEGER     NOT NULL
);

CREATE TABLE users (
    id            TEXT        PRIMARY KEY,
    tenant_uuid   TEXT        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    email         TEXT        NOT NULL,
    username      TEXT,
    password_hash TEXT        NOT NULL,
    role          TEXT        NOT NULL CHECK (role IN ('admin', 'member')),
    active        INTEGER     NOT NULL DEFAULT 1,
    created_at    INTEGER     NOT NULL,
    updated_at    INTEGER     NOT NULL
);
-- Logins name an e-mail or a user name without a tenant, so both are
-- unique across the installation; both are stored lowercased.
CREATE UNIQUE INDEX users_email ON users (email);
CREATE UNIQUE INDEX users_username ON users (username);
CREATE INDEX users_tenant ON users (tenant_uuid);

-- One-shot installation facts. bootstrap_admin is inserted in the same
-- transaction as the first admin, so the primary key makes that endpoint
-- work exactly once, across restarts and concurrent calls.
CREATE TABLE installation (
    name   TEXT        PRIMARY KEY,
    set_at INTEGER     NOT NULL
);

-- A login starts a family of refresh tokens; each refresh replaces
-- current_jti. A refresh token whose jti is not the current one was already
-- rotated away: presenting it again revokes the family.
CREATE TABLE refresh_families (
    id          TEXT        PRIMARY KEY,
    user_id     TEXT        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    current_jti TEXT        NOT NULL,
    created_at  INTEGER     NOT NULL,
    rotated_at  INTEGER     NOT NULL,
    expires_at  INTEGER     NOT NULL,
    revoked_at  INTEGER,
    revoke_reason TEXT
);
CREATE INDEX refresh_families_user ON refresh_families (user_id);

CREATE TABLE password_resets (
    token_hash TEXT        PRIMARY KEY,
    user_id    TEXT        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at INTEGER     NOT NULL,
    expires_at INTEGER     NOT NULL
);

CREATE TABLE invites (
    id          TEXT        PRIMARY KEY,
    tenant_uuid TEXT        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    email       TEXT        NOT NULL,
    role        TEXT        NOT NULL CHECK (role IN ('admin', 'member')),
    token_hash  TEXT        NOT NULL UNIQUE,
    invited_by  TEXT,
    created_at  INTEGER     NOT NULL,
    expires_at  INTEGER     NOT NULL
);
CREATE INDEX invites_tenant ON invites (tenant_uuid);

CREATE TABLE agents (
    uuid        TEXT        PRIMARY KEY,
    tenant_uuid TEXT        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    name        TEXT        NOT NULL,
    version     TEXT        NOT NULL DEFAULT '',
    state       TEXT        NOT NULL DEFAULT 'registered',
    fleet       TEXT        NOT NULL DEFAULT '',
    tags        TEXT       NOT NULL DEFAULT '{}',
    location    TEXT,
    active      INTEGER     NOT NULL DEFAULT 1,
    last_seen   INTEGER,
    created_at  INTEGER     NOT NULL,
    updated_at  INTEGER     NOT NULL
);
CREATE INDEX agents_tenant ON agents (tenant_uuid, name);

-- User API keys: "ek_" + prefix + secret; prefix is shown in listings.
CREATE TABLE api_keys (
    id           TEXT        PRIMARY KEY,
    tenant_uuid  TEXT        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    user_id      TEXT        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    agent_uuid   TEXT,
    name         TEXT        NOT NULL,
    prefix       TEXT        NOT NULL UNIQUE,
    key_hash     TEXT        NOT NULL,
    created_at   INTEGER     NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_uuid);

CREATE TABLE provisioning_keys (
    id          TEXT        PRIMARY KEY,
    tenant_uuid TEXT        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    name        TEXT        NOT NULL DEFAULT '',
    fleet       TEXT        NOT NULL DEFAULT '',
    prefix      TEXT        NOT NULL UNIQUE,
    key_hash    TEXT        NOT NULL,
    created_by  TEXT,
    created_at  INTEGER     NOT NULL,
    expires_at  INTEGER     NOT NULL
);
CREATE INDEX provisioning_keys_tenant ON provisioning_keys (tenant_uuid);

-- Device API keys: "dk2_" + kid + "_" + secret. The kid is the one agents
-- put in their msgIds; it finds the row, the hash is compared in constant
-- time. The MQTT password issued with the key is kept here too.
CREATE TABLE device_keys (
    kid                TEXT        PRIMARY KEY,
    tenant_uuid        TEXT        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    agent_uuid         TEXT        NOT NULL REFERENCES agents (uuid) ON DELETE CASCADE,
    key_hash           TEXT        NOT NULL,
    mqtt_password_hash TEXT        NOT NULL,
    created_at         INTEGER     NOT NULL,
    revoked_at         INTEGER
);
CREATE INDEX device_keys_agent ON device_keys (agent_uuid);

CREATE TABLE audit_events (
    id          INTEGER     PRIMARY KEY AUTOINCREMENT,
    tenant_uuid TEXT,
    at          INTEGER     NOT NULL,
    kind        TEXT        NOT NULL,
    actor       TEXT        NOT NULL DEFAULT '',
    actor_kind  TEXT        NOT NULL DEFAULT '',
    target      TEXT        NOT NULL DEFAULT '',
    ip          TEXT        NOT NULL DEFAULT '',
    outcome     TEXT        NOT NULL DEFAULT 'success',
    detail      TEXT
);
CREATE INDEX audit_events_tenant_at ON audit_events (tenant_uuid, at DESC, id DESC);
