-- See migrations/postgres/0022_readings_rollups.sql. Times are Unix
-- microseconds, as in readings.
CREATE TABLE readings_hourly (
    agent_uuid  TEXT    NOT NULL,
    metric_name TEXT    NOT NULL,
    bucket      INTEGER NOT NULL,
    tenant_id   TEXT    NOT NULL,
    device_name TEXT    NOT NULL,
    protocol    TEXT    NOT NULL,
    unit        TEXT    NOT NULL,
    count       INTEGER NOT NULL,
    sum         REAL,
    min         REAL,
    max         REAL,
    first_time  INTEGER NOT NULL,
    last_time   INTEGER NOT NULL,
    first_value REAL,
    last_value  REAL,
    increase    REAL,
    PRIMARY KEY (agent_uuid, metric_name, bucket, tenant_id, device_name, protocol, unit)
) STRICT, WITHOUT ROWID;
CREATE INDEX readings_hourly_bucket ON readings_hourly (bucket, tenant_id);

CREATE TABLE readings_daily (
    agent_uuid  TEXT    NOT NULL,
    metric_name TEXT    NOT NULL,
    bucket      INTEGER NOT NULL,
    tenant_id   TEXT    NOT NULL,
    device_name TEXT    NOT NULL,
    protocol    TEXT    NOT NULL,
    unit        TEXT    NOT NULL,
    count       INTEGER NOT NULL,
    sum         REAL,
    min         REAL,
    max         REAL,
    first_time  INTEGER NOT NULL,
    last_time   INTEGER NOT NULL,
    first_value REAL,
    last_value  REAL,
    increase    REAL,
    PRIMARY KEY (agent_uuid, metric_name, bucket, tenant_id, device_name, protocol, unit)
) STRICT, WITHOUT ROWID;
CREATE INDEX readings_daily_bucket ON readings_daily (bucket, tenant_id);

CREATE TABLE readings_rollup_state (
    name TEXT PRIMARY KEY,
    low  INTEGER,
    high INTEGER
) STRICT;
INSERT INTO readings_rollup_state (name) VALUES ('hourly'), ('daily');

CREATE TABLE readings_rollup_late (
    bucket INTEGER PRIMARY KEY
) STRICT;

-- The hour is floored from the 2000-01-03 origin, as core/db's TimeBucket
-- does; the double modulo floors times before it.
CREATE TRIGGER readings_rollup_late AFTER INSERT ON readings
WHEN NEW.time < (CAST(strftime('%s', 'now') AS INTEGER) - 300) * 1000000
    AND NEW.value IS NOT NULL AND NEW.tenant_id IS NOT NULL
BEGIN
    INSERT OR IGNORE INTO readings_rollup_late (bucket)
    VALUES (NEW.time - (((NEW.time - 946857600000000) % 3600000000) + 3600000000) % 3600000000);
END;
