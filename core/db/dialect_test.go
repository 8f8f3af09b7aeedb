package db

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

func TestTimeBucketSQL(t *testing.T) {
	tests := []struct {
		d     Dialect
		width time.Duration
		want  string
	}{
		{Dialect{Engine: Postgres, Timescale: true}, 15 * time.Minute,
			"time_bucket('900000000 microseconds'::interval, time)"},
		{Dialect{Engine: Postgres}, time.Hour,
			"date_bin('3600000000 microseconds'::interval, time, timestamptz '2000-01-03 00:00:00+00')"},
		{Dialect{Engine: SQLite}, time.Second,
			"(time - (((time - 946857600000000) % 1000000) + 1000000) % 1000000)"},
	}
	for _, tt := range tests {
		got, err := tt.d.TimeBucket(tt.width, "time")
		if err != nil || got != tt.want {
			t.Errorf("%s TimeBucket(%s) = %q, %v\nwant %q", tt.d, tt.width, got, err, tt.want)
		}
	}
	for _, w := range []time.Duration{0, -time.Second, 1500 * time.Nanosecond} {
		if _, err := (Dialect{Engine: SQLite}).TimeBucket(w, "time"); err == nil {
			t.Errorf("TimeBucket(%s) accepted", w)
		}
	}
	if _, err := (Dialect{}).TimeBucket(time.Second, "time"); err == nil {
		t.Error("TimeBucket on the zero Dialect accepted")
	}
	if got := bucketOrigin.Weekday(); got != time.Monday {
		t.Errorf("bucket origin is a %s, want Monday", got)
	}
}

func TestDialectBasics(t *testing.T) {
	pg, ts, lite := Dialect{Engine: Postgres}, Dialect{Engine: Postgres, Timescale: true}, Dialect{Engine: SQLite}
	if pg.String() != "postgres" || ts.String() != "postgres+timescaledb" || lite.String() != "sqlite" {
		t.Errorf("names: %s %s %s", pg, ts, lite)
	}
	if pg.JSONType() != "jsonb" || lite.JSONType() != "TEXT" {
		t.Errorf("JSON types: %s %s", pg.JSONType(), lite.JSONType())
	}
	now := time.Date(2024, 3, 10, 10, 0, 0, 123456789, time.UTC)
	if got := lite.TimeArg(now); got != now.UnixMicro() {
		t.Errorf("sqlite TimeArg = %v", got)
	}
	if got := pg.TimeArg(now); got != now {
		t.Errorf("postgres TimeArg = %v", got)
	}
	var a, b Timestamp
	if err := a.Scan(now.UnixMicro()); err != nil {
		t.Fatal(err)
	}
	if err := b.Scan(now.In(time.FixedZone("x", 3600)).Truncate(time.Microsecond)); err != nil {
		t.Fatal(err)
	}
	if !a.Equal(b.Time) || a.Location() != time.UTC || b.Location() != time.UTC {
		t.Errorf("Timestamp scans differ: %v %v", a, b)
	}
	if err := a.Scan("2024-03-10"); err == nil {
		t.Error("Timestamp scanned a string")
	}
}

type bucketRow struct {
	start time.Time
	count int
	sum   float64
}

func (b bucketRow) String() string {
	return fmt.Sprintf("%s n=%d sum=%g", b.start.Format(time.RFC3339Nano), b.count, b.sum)
}

// TestTimeBucketIntegration checks both engines put a small data set into
// the same buckets, against expectations worked out by hand. The set has
// edges on both sides of a bucket boundary, a microsecond past one, and a
// time before the origin, where truncating division would go wrong.
func TestTimeBucketIntegration(t *testing.T) {
	at := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	data := []struct {
		ts    string
		value float64
	}{
		{"1999-12-31T23:59:59.5Z", 1},
		{"2024-03-10T10:00:00Z", 2},
		{"2024-03-10T10:14:59.999999Z", 3},
		{"2024-03-10T10:15:00Z", 4},
		{"2024-03-10T10:29:00Z", 5},
		{"2024-03-10T11:00:00.000001Z", 6},
		{"2024-03-11T00:00:00Z", 7},
	}
	golden := map[time.Duration][]bucketRow{
		15 * time.Minute: {
			{at("1999-12-31T23:45:00Z"), 1, 1},
			{at("2024-03-10T10:00:00Z"), 2, 5},
			{at("2024-03-10T10:15:00Z"), 2, 9},
			{at("2024-03-10T11:00:00Z"), 1, 6},
			{at("2024-03-11T00:00:00Z"), 1, 7},
		},
		// Weeks start on Monday: 2024-03-10 is a Sunday, 2024-03-11 a
		// Monday, 1999-12-31 a Friday.
		7 * 24 * time.Hour: {
			{at("1999-12-27T00:00:00Z"), 1, 1},
			{at("2024-03-04T00:00:00Z"), 5, 20},
			{at("2024-03-11T00:00:00Z"), 1, 7},
		},
		// 7 minutes divides neither an hour nor a day, so the origin shows:
		// 2024-03-10T10:00Z is 12,720,120 minutes (a multiple of 7) after
		// 2000-01-03, so a bucket starts there, where Unix-epoch alignment
		// would start one at 09:54 and midnight alignment one at 09:55.
		7 * time.Minute: {
			{at("1999-12-31T23:56:00Z"), 1, 1},
			{at("2024-03-10T10:00:00Z"), 1, 2},
			{at("2024-03-10T10:14:00Z"), 2, 7},
			{at("2024-03-10T10:28:00Z"), 1, 5},
			{at("2024-03-10T10:56:00Z"), 1, 6},
			{at("2024-03-11T00:00:00Z"), 1, 7},
		},
	}
	forEachEngine(t, func(t *testing.T, cfg config.DB) {
		d := migratedDB(t, cfg)
		ctx := testCtx(t)
		dia := d.Dialect()
		for _, r := range data {
			if _, err := d.SQL().ExecContext(ctx, insertReading,
				dia.TimeArg(at(r.ts)), testAgent, "press.temp", r.value, "modbus", "C", "GOOD", "press", "t1"); err != nil {
				t.Fatal(err)
			}
		}
		for width, want := range golden {
			expr, err := dia.TimeBucket(width, "time")
			if err != nil {
				t.Fatal(err)
			}
			rows, err := d.ReadSQL().QueryContext(ctx, "SELECT "+expr+` AS bucket, count(*), sum(value)
				FROM readings WHERE agent_uuid = $1 AND metric_name = $2 GROUP BY bucket ORDER BY bucket`,
				testAgent, "press.temp")
			if err != nil {
				t.Fatalf("%s: %v", width, err)
			}
			var got []bucketRow
			for rows.Next() {
				var b bucketRow
				var ts Timestamp
				if err := rows.Scan(&ts, &b.count, &b.sum); err != nil {
					t.Fatal(err)
				}
				b.start = ts.Time
				got = append(got, b)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			rows.Close()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s buckets of %s:\n got %s\nwant %s", dia, width,
					strings.ReplaceAll(fmt.Sprint(got), "} {", "}\n     {"),
					strings.ReplaceAll(fmt.Sprint(want), "} {", "}\n     {"))
			}
		}
	})
}
