package db

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
)

// IsDataError reports whether err is about the values written (one the
// column or type refuses: PostgreSQL classes 22 and 23, SQLite TOOBIG,
// CONSTRAINT, MISMATCH and RANGE), which retrying cannot fix. Every other
// failure (connection, timeout, shutdown, disk full, a missing table) is the
// backend's, and the data should wait for it rather than be dropped.
func IsDataError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23")
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case 18, 19, 20, 25: // TOOBIG, CONSTRAINT, MISMATCH, RANGE
			return true
		}
	}
	return false
}

// IsUniqueViolation reports whether err is a unique or primary-key
// constraint refusing a duplicate, on either engine: the answer a
// create-if-absent turns into 409.
func IsUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23505"
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case 2067, 1555: // SQLITE_CONSTRAINT_UNIQUE, SQLITE_CONSTRAINT_PRIMARYKEY
			return true
		}
	}
	return false
}
