-- See migrations/postgres/0008_provisioning_key_agent.sql.
ALTER TABLE provisioning_keys ADD COLUMN agent_uuid TEXT REFERENCES agents (uuid) ON DELETE CASCADE;
