-- Log lines come from stream entries that may be delivered twice (a worker
-- dies after its commit, before its acknowledgement). The entry id and the
-- line's position in the entry identify a line, so a redelivery adds nothing.
ALTER TABLE agent_logs ADD COLUMN entry_id text;
ALTER TABLE agent_logs ADD COLUMN line integer;
CREATE UNIQUE INDEX agent_logs_entry_line_idx ON agent_logs (tenant_id, entry_id, line);
