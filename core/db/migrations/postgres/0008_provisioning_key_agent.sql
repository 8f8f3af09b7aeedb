-- A provisioning key may be made for one existing agent: re-provisioning
-- an agent (after a factory reset, say) takes such a key, so a key handed
-- out for new devices cannot take over one that is already registered.
ALTER TABLE provisioning_keys ADD COLUMN agent_uuid uuid REFERENCES agents (uuid) ON DELETE CASCADE;
