-- Intentionally no change on SQLite: it has no table partitions, and
-- raw retention deletes old readings in batches along the primary key
-- instead (docs/database.md, section Readings partitions and retention).
-- The version exists so both engines keep the same migration numbers; see
-- migrations/postgres/0021_readings_partitions.sql for PostgreSQL.
SELECT 1;
