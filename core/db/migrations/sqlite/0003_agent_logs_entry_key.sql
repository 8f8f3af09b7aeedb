-- See migrations/postgres/0003_agent_logs_entry_key.sql.
ALTER TABLE agent_logs ADD COLUMN entry_id TEXT;
ALTER TABLE agent_logs ADD COLUMN line INTEGER;
CREATE UNIQUE INDEX agent_logs_entry_line_idx ON agent_logs (tenant_id, entry_id, line);
