-- Jobs: one-off work an admin dispatches to agents (docs/fleets-and-jobs.md,
-- section Jobs). Follows 0012_fleets.
--
-- Job templates: a handler with its params, which may hold "{{name}}"
-- placeholders for the declared parameters.
CREATE TABLE job_templates (
    id              uuid        PRIMARY KEY,
    tenant_uuid     uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    name            text        NOT NULL,
    description     text        NOT NULL DEFAULT '',
    handler         text        NOT NULL,
    params          jsonb       NOT NULL,
    parameters      jsonb       NOT NULL,
    timeout_seconds integer     NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    UNIQUE (tenant_uuid, name)
);

-- A job; template_id keeps no reference, so deleting a template keeps the
-- jobs made from it. released counts the executions (by seq) the rollout
-- let go; next_release_at is when it lets the next one go. Both move only
-- through conditional UPDATEs, so API replicas never release one twice.
CREATE TABLE jobs (
    id                   uuid        PRIMARY KEY,
    tenant_uuid          uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    template_id          uuid,
    handler              text        NOT NULL,
    params               jsonb       NOT NULL,
    targets              jsonb       NOT NULL,
    agents_per_minute    integer     NOT NULL DEFAULT 0,
    abort_failed_percent integer     NOT NULL DEFAULT 0,
    abort_min_executed   integer     NOT NULL DEFAULT 1,
    timeout_seconds      integer     NOT NULL DEFAULT 0,
    status               text        NOT NULL,
    total                integer     NOT NULL,
    released             integer     NOT NULL DEFAULT 0,
    next_release_at      timestamptz NOT NULL,
    created_by           text        NOT NULL DEFAULT '',
    created_at           timestamptz NOT NULL,
    completed_at         timestamptz
);
CREATE INDEX jobs_tenant ON jobs (tenant_uuid, created_at);
CREATE INDEX jobs_status ON jobs (status, next_release_at);

-- One job on one agent. id orders the listings and their cursors; seq is
-- the rollout order within the job.
CREATE TABLE job_executions (
    id            bigserial   PRIMARY KEY,
    job_id        uuid        NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    tenant_uuid   uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    agent_uuid    uuid        NOT NULL REFERENCES agents (uuid) ON DELETE CASCADE,
    seq           integer     NOT NULL,
    status        text        NOT NULL,
    status_reason text        NOT NULL DEFAULT '',
    result        text        NOT NULL DEFAULT '',
    exit_data     jsonb,
    queued_at     timestamptz NOT NULL,
    released_at   timestamptz,
    started_at    timestamptz,
    finished_at   timestamptz,
    updated_at    timestamptz NOT NULL,
    UNIQUE (job_id, agent_uuid)
);
CREATE INDEX job_executions_job_seq ON job_executions (job_id, seq);
CREATE INDEX job_executions_agent ON job_executions (agent_uuid, status, id);
CREATE INDEX job_executions_tenant ON job_executions (tenant_uuid, id);
CREATE INDEX job_executions_running ON job_executions (status, started_at);
