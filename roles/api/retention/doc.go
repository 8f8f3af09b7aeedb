// Package retention keeps the cloud's raw readings bounded: it is the
// serve-api service that maintains readings' daily partitions and applies
// api.readings_retention (docs/database.md, section "Readings partitions
// and retention").
//
// How depends on the storage Migrate set up:
//
//   - partitioned PostgreSQL (migration 0021): partitions are made
//     DefaultAhead days ahead, rows readings_future caught are moved into
//     their new day, and partitions entirely older than the retention are
//     dropped, never deleted row by row;
//   - TimescaleDB: the hypertable makes its chunks itself, and
//     drop_chunks removes those entirely older than the retention;
//   - SQLite (all-in-one), or PostgreSQL left unpartitioned: older rows
//     are deleted series by series in statements of at most Batch rows,
//     with a pause between full batches, so the single writer is never
//     held for long.
//
// Replicas serialise on a PostgreSQL advisory lock; one that finds it
// taken skips the round. It lives under roles/api because serve-api (and
// all-in-one, which runs serve-api) is the role that runs it, as it runs
// the event-log pruner; ingest only writes.
package retention
