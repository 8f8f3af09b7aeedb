-- Daily range partitions of readings by time (docs/database.md, section
-- Readings partitions and retention), so raw retention drops whole
-- partitions instead of deleting rows.
--
-- Layout: readings_past [MINVALUE, B), one readings_pYYYYMMDD per UTC day
-- [B, E), readings_future [E, MAXVALUE). Every timestamp has a partition,
-- so no reading is ever refused, and there is no DEFAULT partition: with
-- one, PostgreSQL may not read the partitions in time order, and each
-- series' newest-row probe (the latest readings) would descend every
-- partition's key instead of stopping at the newest one holding the
-- series. Partition maintenance in serve-api keeps days ahead, moves the
-- rows readings_future holds into their day when it adds days, and drops
-- partitions past api.readings_retention.
--
-- The existing table becomes readings_past as it is: attaching it scans
-- it once to check the bound but rewrites nothing, so an upgrade keeps
-- every row and costs no second copy on disk. B is tomorrow (UTC), so only
-- rows stamped after today move, into their new partitions. Retention
-- drops readings_past whole once B is older than the retention.
--
-- Storage parameters, set per partition (PostgreSQL 15 takes none on the
-- partitioned table): readings rows are never updated (a resent sample is
-- ON CONFLICT DO NOTHING), so fillfactor stays 100, no page space kept
-- for updates. Autovacuum's insert trigger (20% of the table by default)
-- would leave up to a fifth of a finished day not all-visible until the
-- anti-wraparound vacuum, and the readings queries are index-only scans
-- of the key that visit the heap for such pages: 2% keeps that small.
-- Analyze at 2% too, so today's partition has statistics for the hour
-- that just arrived.
--
-- Where TimescaleDB is available, Migrate makes readings a hypertable
-- (core/db/timescale.go), whose chunks do this partitioning; this
-- migration leaves the table alone there, and on a table already
-- partitioned.
DO $$
DECLARE
    params   constant text := 'fillfactor = 100, autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02';
    boundary constant timestamptz := date_trunc('day', now(), 'UTC') + interval '1 day';
    day      timestamptz;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'timescaledb')
       OR EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = 'readings'::regclass) THEN
        RETURN;
    END IF;
    ALTER TABLE readings RENAME TO readings_past;
    ALTER INDEX readings_pkey RENAME TO readings_past_pkey;
    EXECUTE format('ALTER TABLE readings_past SET (%s)', params);
    CREATE TABLE readings (LIKE readings_past INCLUDING DEFAULTS) PARTITION BY RANGE (time);
    ALTER TABLE readings ADD PRIMARY KEY (agent_uuid, metric_name, time);
    -- Tomorrow and the seven days after; maintenance keeps days ahead.
    FOR i IN 0..7 LOOP
        day := boundary + i * interval '1 day';
        EXECUTE format('CREATE TABLE %I PARTITION OF readings FOR VALUES FROM (%L) TO (%L) WITH (%s)',
            'readings_p' || to_char(day AT TIME ZONE 'UTC', 'YYYYMMDD'), day, day + interval '1 day', params);
    END LOOP;
    EXECUTE format('CREATE TABLE readings_future PARTITION OF readings FOR VALUES FROM (%L) TO (MAXVALUE) WITH (%s)',
        boundary + interval '8 days', params);
    INSERT INTO readings SELECT * FROM readings_past WHERE time >= boundary;
    DELETE FROM readings_past WHERE time >= boundary;
    EXECUTE format('ALTER TABLE readings ATTACH PARTITION readings_past FOR VALUES FROM (MINVALUE) TO (%L)', boundary);
END $$;
