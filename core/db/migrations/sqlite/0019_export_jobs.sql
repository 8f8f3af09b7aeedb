-- See migrations/postgres/0019_export_jobs.sql.
CREATE TABLE export_jobs (
    id           TEXT    PRIMARY KEY,
    tenant_uuid  TEXT    NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    created_by   TEXT,
    format       TEXT    NOT NULL,
    params       TEXT    NOT NULL,
    status       TEXT    NOT NULL,
    error        TEXT    NOT NULL DEFAULT '',
    row_count    INTEGER NOT NULL DEFAULT 0,
    size_bytes   INTEGER NOT NULL DEFAULT 0,
    link_secret  TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    started_at   INTEGER,
    heartbeat_at INTEGER,
    finished_at  INTEGER,
    expires_at   INTEGER
) STRICT;
CREATE INDEX export_jobs_status ON export_jobs (status, created_at);
CREATE INDEX export_jobs_expires ON export_jobs (expires_at);
