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
