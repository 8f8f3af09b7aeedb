-- Accounts, credentials and the agent registry of the Cloud API. Every row
-- that belongs to a tenant carries tenant_uuid, and every query filters on
-- the caller's tenant. Secrets are never stored: only SHA-256 hashes of
-- high-entropy keys and tokens, and argon2id hashes of user passwords.
CREATE TABLE tenants (
    uuid       uuid        PRIMARY KEY,
    name       text        NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE users (
    id            uuid        PRIMARY KEY,
    tenant_uuid   uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    email         text        NOT NULL,
    username      text,
    password_hash text        NOT NULL,
    role          text        NOT NULL CHECK (role IN ('admin', 'member')),
    active        boolean     NOT NULL DEFAULT true,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
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
    name   text        PRIMARY KEY,
    set_at timestamptz NOT NULL
);

-- A login starts a family of refresh tokens; each refresh replaces
-- current_jti. A refresh token whose jti is not the current one was already
-- rotated away: presenting it again revokes the family.
CREATE TABLE refresh_families (
    id          text        PRIMARY KEY,
    user_id     uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    current_jti text        NOT NULL,
    created_at  timestamptz NOT NULL,
    rotated_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz,
    revoke_reason text
);
CREATE INDEX refresh_families_user ON refresh_families (user_id);

CREATE TABLE password_resets (
    token_hash text        PRIMARY KEY,
    user_id    uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE TABLE invites (
    id          uuid        PRIMARY KEY,
    tenant_uuid uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    email       text        NOT NULL,
    role        text        NOT NULL CHECK (role IN ('admin', 'member')),
    token_hash  text        NOT NULL UNIQUE,
    invited_by  uuid,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX invites_tenant ON invites (tenant_uuid);

CREATE TABLE agents (
    uuid        uuid        PRIMARY KEY,
    tenant_uuid uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    name        text        NOT NULL,
    version     text        NOT NULL DEFAULT '',
    state       text        NOT NULL DEFAULT 'registered',
    fleet       text        NOT NULL DEFAULT '',
    tags        jsonb       NOT NULL DEFAULT '{}',
    location    jsonb,
    active      boolean     NOT NULL DEFAULT true,
    last_seen   timestamptz,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX agents_tenant ON agents (tenant_uuid, name);

-- User API keys: "ek_" + prefix + secret; prefix is shown in listings.
CREATE TABLE api_keys (
    id           uuid        PRIMARY KEY,
    tenant_uuid  uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    user_id      uuid        NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    agent_uuid   uuid,
    name         text        NOT NULL,
    prefix       text        NOT NULL UNIQUE,
    key_hash     text        NOT NULL,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_keys_tenant ON api_keys (tenant_uuid);

CREATE TABLE provisioning_keys (
    id          uuid        PRIMARY KEY,
    tenant_uuid uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    name        text        NOT NULL DEFAULT '',
    fleet       text        NOT NULL DEFAULT '',
    prefix      text        NOT NULL UNIQUE,
    key_hash    text        NOT NULL,
    created_by  uuid,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX provisioning_keys_tenant ON provisioning_keys (tenant_uuid);

-- Device API keys: "dk2_" + kid + "_" + secret. The kid is the one agents
-- put in their msgIds; it finds the row, the hash is compared in constant
-- time. The MQTT password issued with the key is kept here too.
CREATE TABLE device_keys (
    kid                text        PRIMARY KEY,
    tenant_uuid        uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    agent_uuid         uuid        NOT NULL REFERENCES agents (uuid) ON DELETE CASCADE,
    key_hash           text        NOT NULL,
    mqtt_password_hash text        NOT NULL,
    created_at         timestamptz NOT NULL,
    revoked_at         timestamptz
);
CREATE INDEX device_keys_agent ON device_keys (agent_uuid);

CREATE TABLE audit_events (
    id          bigserial   PRIMARY KEY,
    tenant_uuid uuid,
    at          timestamptz NOT NULL,
    kind        text        NOT NULL,
    actor       text        NOT NULL DEFAULT '',
    actor_kind  text        NOT NULL DEFAULT '',
    target      text        NOT NULL DEFAULT '',
    ip          text        NOT NULL DEFAULT '',
    outcome     text        NOT NULL DEFAULT 'success',
    detail      jsonb
);
CREATE INDEX audit_events_tenant_at ON audit_events (tenant_uuid, at DESC, id DESC);
