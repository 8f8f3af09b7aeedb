package db

import (
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
)

// Engine names the database server behind a DB.
type Engine string

// The engines edgeplat runs on.
const (
	Postgres Engine = "postgres"
	SQLite   Engine = "sqlite"
)

// Dialect holds the few SQL differences between the engines. Everything not
// here is written once: `$1` placeholders, `ON CONFLICT DO NOTHING`,
// `ON CONFLICT (...) DO UPDATE` and `RETURNING` mean the same on both.
//
// It is a plain comparable value so code that builds SQL can be tested
// without a server: db.Dialect{Engine: db.SQLite}.
type Dialect struct {
	Engine Engine
	// Timescale is true when the TimescaleDB extension is installed in the
	// PostgreSQL database, which makes time_bucket available.
	Timescale bool
}

// bucketOrigin aligns buckets on every engine. It is TimescaleDB's default
// time_bucket origin (a Monday, midnight UTC), so weekly buckets start on
// Mondays and all three bucket expressions agree to the microsecond.
var bucketOrigin = time.Date(2000, 1, 3, 0, 0, 0, 0, time.UTC)

// String returns "postgres", "postgres+timescaledb" or "sqlite".
func (d Dialect) String() string {
	if d.Engine == Postgres && d.Timescale {
		return "postgres+timescaledb"
	}
	return string(d.Engine)
}

// TimeBucket returns an SQL expression giving the start of the width-wide
// bucket that column falls in, of the column's own type (timestamptz on
// PostgreSQL, Unix microseconds on SQLite), so it can be grouped, ordered and
// compared with time arguments made by TimeArg.
//
// column is pasted into the SQL as is: pass a column name or expression
// written in code, never outside input. width must be a positive whole
// number of microseconds. Buckets are floored (times before the origin go
// to the earlier bucket) and aligned to 2000-01-03T00:00Z on every engine.
// Plain PostgreSQL uses date_bin, which needs PostgreSQL 14; Open refuses
// older servers.
func (d Dialect) TimeBucket(width time.Duration, column string) (string, error) {
	if width <= 0 || width%time.Microsecond != 0 {
		return "", fmt.Errorf("time bucket width %s: must be a positive whole number of microseconds", width)
	}
	us := width.Microseconds()
	switch d.Engine {
	case Postgres:
		iv := fmt.Sprintf("'%d microseconds'::interval", us)
		if d.Timescale {
			return fmt.Sprintf("time_bucket(%s, %s)", iv, column), nil
		}
		return fmt.Sprintf("date_bin(%s, %s, timestamptz '2000-01-03 00:00:00+00')", iv, column), nil
	case SQLite:
		// Integer arithmetic stays exact; the double modulo floors
		// negative offsets, which SQLite's % (truncating, like C's) would not.
		o := bucketOrigin.UnixMicro()
		return fmt.Sprintf("(%[1]s - (((%[1]s - %[2]d) %% %[3]d) + %[3]d) %% %[3]d)", column, o, us), nil
	}
	return "", fmt.Errorf("time bucket: unknown engine %q", d.Engine)
}

// JSONType is the column type for JSON documents: jsonb on PostgreSQL, TEXT
// (checked with json_valid in the schema) on SQLite.
func (d Dialect) JSONType() string {
	if d.Engine == SQLite {
		return "TEXT"
	}
	return "jsonb"
}

// TimeArg converts t into the argument a time column takes: t itself for
// PostgreSQL's timestamptz, Unix microseconds for SQLite's INTEGER columns.
// Passing a time.Time to SQLite would store text, which the STRICT tables
// refuse.
func (d Dialect) TimeArg(t time.Time) any {
	if d.Engine == SQLite {
		return t.UnixMicro()
	}
	return t
}

// Timestamp scans a time column on either engine: timestamptz arrives as
// time.Time, SQLite's Unix microseconds as int64. The result is in UTC.
type Timestamp struct{ time.Time }

// Scan implements sql.Scanner.
func (ts *Timestamp) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		ts.Time = v.UTC()
	case int64:
		ts.Time = time.UnixMicro(v).UTC()
	case nil:
		ts.Time = time.Time{}
	default:
		return fmt.Errorf("scan timestamp: unsupported type %T", src)
	}
	return nil
}

var _ sql.Scanner = (*Timestamp)(nil)

// UUIDArg is the argument for a nullable UUID column: s in canonical form,
// or NULL when s is not a UUID (an empty optional reference).
func UUIDArg(s string) any {
	u, err := codec.ParseUUID(s)
	if err != nil {
		return nil
	}
	return u.String()
}

// JSONText returns an SQL expression giving the member at path (keys of
// nested objects) of the JSON column as text, NULL when absent: -> and ->>
// on PostgreSQL, json_extract on SQLite. column and path are pasted into
// the SQL as they are: pass names written in code, never outside input.
func (d Dialect) JSONText(column string, path ...string) string {
	if len(path) == 0 {
		panic("BUG: db.Dialect.JSONText without a path")
	}
	if d.Engine == SQLite {
		return "CAST(json_extract(" + column + ", '$." + strings.Join(path, ".") + "') AS TEXT)"
	}
	var b strings.Builder
	b.WriteString("(" + column)
	for i, k := range path {
		if i == len(path)-1 {
			b.WriteString("->>'" + k + "'")
		} else {
			b.WriteString("->'" + k + "'")
		}
	}
	b.WriteString(")")
	return b.String()
}
