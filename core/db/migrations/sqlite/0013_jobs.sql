-- See migrations/postgres/0013_jobs.sql.
CREATE TABLE job_templates (
    id              TEXT    PRIMARY KEY,
    tenant_uuid     TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    name            TEXT    NOT NULL,
    description     TEXT    NOT NULL DEFAULT '',
    handler         TEXT    NOT NULL,
    params          TEXT    NOT NULL CHECK (json_valid(params)),
    parameters      TEXT    NOT NULL CHECK (json_valid(parameters)),
    timeout_seconds INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    UNIQUE (tenant_uuid, name)
) STRICT;

CREATE TABLE jobs (
    id                   TEXT    PRIMARY KEY,
    tenant_uuid          TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    template_id          TEXT,
    handler              TEXT    NOT NULL,
    params               TEXT    NOT NULL CHECK (json_valid(params)),
    targets              TEXT    NOT NULL CHECK (json_valid(targets)),
    agents_per_minute    INTEGER NOT NULL DEFAULT 0,
    abort_failed_percent INTEGER NOT NULL DEFAULT 0,
    abort_min_executed   INTEGER NOT NULL DEFAULT 1,
    timeout_seconds      INTEGER NOT NULL DEFAULT 0,
    status               TEXT    NOT NULL,
    total                INTEGER NOT NULL,
    released             INTEGER NOT NULL DEFAULT 0,
    next_release_at      INTEGER NOT NULL,
    created_by           TEXT    NOT NULL DEFAULT '',
    created_at           INTEGER NOT NULL,
    completed_at         INTEGER
) STRICT;
CREATE INDEX jobs_tenant ON jobs (tenant_uuid, created_at);
CREATE INDEX jobs_status ON jobs (status, next_release_at);

-- id is the rowid (no AUTOINCREMENT, as agent_logs).
CREATE TABLE job_executions (
    id            INTEGER PRIMARY KEY,
    job_id        TEXT    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    tenant_uuid   TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    agent_uuid    TEXT    NOT NULL REFERENCES agents (uuid) ON DELETE CASCADE,
    seq           INTEGER NOT NULL,
    status        TEXT    NOT NULL,
    status_reason TEXT    NOT NULL DEFAULT '',
    result        TEXT    NOT NULL DEFAULT '',
    exit_data     TEXT    CHECK (exit_data IS NULL OR json_valid(exit_data)),
    queued_at     INTEGER NOT NULL,
    released_at   INTEGER,
    started_at    INTEGER,
    finished_at   INTEGER,
    updated_at    INTEGER NOT NULL,
    UNIQUE (job_id, agent_uuid)
) STRICT;
CREATE INDEX job_executions_job_seq ON job_executions (job_id, seq);
CREATE INDEX job_executions_agent ON job_executions (agent_uuid, status, id);
CREATE INDEX job_executions_tenant ON job_executions (tenant_uuid, id);
CREATE INDEX job_executions_running ON job_executions (status, started_at);
