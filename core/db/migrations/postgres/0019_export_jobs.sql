-- Background exports of readings (docs/export.md). Follows
-- 0017_readings_anomaly_score; 0018 is another change's.
--
-- One row per export job. params is the selection as the query string
-- GET /export/readings takes, with start and end resolved when the job
-- was created, so a job run later exports the same rows. link_secret
-- signs the job's download links; heartbeat_at moves while a replica
-- writes the file, so a job whose replica died is noticed. A job goes
-- with its tenant; its file is deleted at expires_at with the row.
CREATE TABLE export_jobs (
    id           uuid        PRIMARY KEY,
    tenant_uuid  uuid        NOT NULL REFERENCES tenants (uuid) ON DELETE CASCADE,
    created_by   uuid,
    format       text        NOT NULL,
    params       text        NOT NULL,
    status       text        NOT NULL,
    error        text        NOT NULL DEFAULT '',
    row_count    bigint      NOT NULL DEFAULT 0,
    size_bytes   bigint      NOT NULL DEFAULT 0,
    link_secret  text        NOT NULL,
    created_at   timestamptz NOT NULL,
    started_at   timestamptz,
    heartbeat_at timestamptz,
    finished_at  timestamptz,
    expires_at   timestamptz
);
CREATE INDEX export_jobs_status ON export_jobs (status, created_at);
CREATE INDEX export_jobs_expires ON export_jobs (expires_at);
