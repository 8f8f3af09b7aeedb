// Package db opens the cloud database, PostgreSQL in production and SQLite
// (modernc.org/sqlite, pure Go) in all-in-one, and brings its schema up to
// date with the migrations embedded in the binary.
//
// It deliberately does not hide the drivers behind a common interface: the
// ingest hot path needs pgx's CopyFrom and batches on PostgreSQL and one
// transaction of prepared inserts on SQLite, and a lowest-common-denominator
// layer would take both away. Instead DB hands out the native handles (Pool,
// SQL, ReadSQL) and Dialect names the few places where the SQL differs.
//
// # Handles
//
// On PostgreSQL, Pool is the pgxpool.Pool and SQL/ReadSQL are one
// database/sql view over that same pool (pgx/v5/stdlib), so portable queries
// can be written once with database/sql and still count against the single
// db.pool_size budget the saturation signal reports.
//
// On SQLite there are two *sql.DB: SQL is the only writer, one connection
// whose transactions start with BEGIN IMMEDIATE; ReadSQL is a pool of
// db.pool_size query_only connections. SQLite admits one writer at a time;
// funnelling writes through one connection makes concurrent writers queue in
// database/sql (context-aware, no CPU) instead of spinning in SQLite's busy
// handler and failing with SQLITE_BUSY, and BEGIN IMMEDIATE takes the write
// lock up front so a read-then-write transaction can never fail to upgrade.
// WAL lets the readers run alongside the writer. The one rule this imposes:
// while a goroutine holds a transaction from SQL it must not use SQL outside
// that transaction, or it waits for itself.
//
// # SQLite durability
//
// journal_mode=WAL with synchronous=NORMAL: a commit is durable against a
// process crash, and the file is never corrupted, but a power loss or kernel
// crash can roll back the last commits since the previous WAL sync. FULL
// would fsync on every commit and cut all-in-one ingest throughput several
// times over for a single-node edge deployment whose agents can resend;
// Close checkpoints the WAL into the main file on a clean shutdown.
//
// # Time on SQLite
//
// Time columns are INTEGER Unix microseconds in STRICT tables: the same
// resolution as timestamptz, so nothing is rounded differently between the
// engines; integer compare keeps ordering and range scans exact and fast;
// eight bytes instead of a 27-byte text form; and bucketing is integer
// arithmetic. STRICT makes a stray time.Time argument (which the driver would
// store as text that sorts wrongly) an error. Use Dialect.TimeArg for
// arguments and Timestamp for scanning. UUIDs are TEXT in canonical lowercase,
// enforced by a CHECK.
//
// # Migrations
//
// Migrate applies migrations/<engine>/NNNN_name.sql in version order, each in
// its own transaction, recording version, name, SHA-256 and time in
// schema_migrations. PostgreSQL runs them under a session advisory lock held
// on a dedicated connection, so replicas starting together migrate once;
// SQLite takes the write lock per migration (BEGIN IMMEDIATE) and re-checks
// inside it. An applied migration whose file changed, or a database newer
// than the binary, stops start-up with an error naming it. After the
// migrations, Migrate turns readings into a TimescaleDB hypertable when the
// extension is available, and logs which storage mode is in use.
package db
