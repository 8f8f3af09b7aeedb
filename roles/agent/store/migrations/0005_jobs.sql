-- Job executions (docs/agent.md, section Jobs): one row per jobId the
-- agent received, kept so a dispatch that arrives again (MQTT redelivery,
-- then the poll's answer) is never run twice, and so a final status
-- survives a restart until the cloud has taken it. state is received
-- (queued here), running or ended; status, reason, result and exit_data
-- are the final report once ended, reported 1 once the cloud took it.
CREATE TABLE jobs (
    job_id          TEXT PRIMARY KEY,
    handler         TEXT NOT NULL,
    params          TEXT NOT NULL DEFAULT '',
    timeout_seconds INTEGER NOT NULL DEFAULT 0,
    state           TEXT NOT NULL DEFAULT 'received',
    status          TEXT NOT NULL DEFAULT '',
    reason          TEXT NOT NULL DEFAULT '',
    result          TEXT NOT NULL DEFAULT '',
    exit_data       TEXT NOT NULL DEFAULT '',
    reported        INTEGER NOT NULL DEFAULT 0,
    received_at     INTEGER NOT NULL,
    started_at      INTEGER,
    ended_at        INTEGER,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX jobs_received ON jobs (received_at);
CREATE INDEX jobs_open ON jobs (state, reported);
