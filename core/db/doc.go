// Package db opens the cloud database, PostgreSQL in production and SQLite
// (modernc.org/sqlite, pure Go) in all-in-one, and brings its schema up to
// date with the migrations embedded in the binary. It hands out the native
// handles (Pool, SQL, ReadSQL) rather than hiding the drivers, and Dialect
// names the few places where the SQL differs. On SQLite, SQL is the only
// writer: while a goroutine holds a transaction from SQL it must not use
// SQL outside it. Time arguments go through Dialect.TimeArg and are
// scanned with Timestamp. See docs/database.md.
package db
