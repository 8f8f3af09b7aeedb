-- Hourly and daily rollups of readings (docs/readings-api.md, section
-- Rollups). They outlive raw retention and serve long ranges: one row per
-- series and hour (or day) instead of one per sample. A series here is the
-- query language's label set (tenant, agent, metric, device, protocol,
-- unit), NULL labels stored as '' so they can be part of the key; readings
-- without a value or a tenant are never read by an endpoint and are left
-- out. count, sum, min and max serve the statistics; first/last time and
-- value and the increase with counter resets serve the query language's
-- range functions, so an answer over rollups is the answer over raw rows.
-- Value columns are nullable because SQLite turns a NaN sum into NULL.
CREATE TABLE readings_hourly (
    agent_uuid  uuid             NOT NULL,
    metric_name text             NOT NULL,
    bucket      timestamptz      NOT NULL,
    tenant_id   text             NOT NULL,
    device_name text             NOT NULL,
    protocol    text             NOT NULL,
    unit        text             NOT NULL,
    count       bigint           NOT NULL,
    sum         double precision,
    min         double precision,
    max         double precision,
    first_time  timestamptz      NOT NULL,
    last_time   timestamptz      NOT NULL,
    first_value double precision,
    last_value  double precision,
    increase    double precision,
    PRIMARY KEY (agent_uuid, metric_name, bucket, tenant_id, device_name, protocol, unit)
);
-- By time: the query language (tenant and time, no agent), the daily
-- rollup and the retention read ranges of buckets.
CREATE INDEX readings_hourly_bucket ON readings_hourly (bucket, tenant_id);

CREATE TABLE readings_daily (LIKE readings_hourly INCLUDING ALL);

-- What the rollup worker has done: name is 'hourly' or 'daily'; buckets in
-- [low, high) are rolled up, those before low were deleted by the rollup
-- retention. NULL: nothing yet.
CREATE TABLE readings_rollup_state (
    name text PRIMARY KEY,
    low  timestamptz,
    high timestamptz
);
INSERT INTO readings_rollup_state (name) VALUES ('hourly'), ('daily');

-- Hours that got a reading after they may have been rolled up. A reading
-- older than five minutes when it is inserted (an agent's backlog, a
-- replay) marks its hour; the worker rolls an hour up only once it has
-- been over for ten minutes, so a reading it has not seen is always
-- marked. Fresh readings, the ingest's hot path, only evaluate the WHEN
-- condition.
CREATE TABLE readings_rollup_late (
    bucket timestamptz PRIMARY KEY
);

CREATE FUNCTION readings_rollup_mark_late() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO readings_rollup_late (bucket)
    VALUES (date_bin('1 hour'::interval, NEW.time, timestamptz '2000-01-03 00:00:00+00'))
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER readings_rollup_late AFTER INSERT ON readings
FOR EACH ROW
WHEN (NEW.time < now() - interval '5 minutes' AND NEW.value IS NOT NULL AND NEW.tenant_id IS NOT NULL)
EXECUTE FUNCTION readings_rollup_mark_late();
