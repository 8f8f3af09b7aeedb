package retention

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
)

// Series of the synthetic data: two agents, two metrics each.
var (
	testAgents  = []string{"11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"}
	testMetrics = []string{"boiler.temp", "pump.speed"}
)

func exec(t *testing.T, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, query string, args ...any) int64 {
	t.Helper()
	r, err := q.ExecContext(t.Context(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	n, _ := r.RowsAffected()
	return n
}

func count(t *testing.T, d *db.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := d.SQL().QueryRowContext(t.Context(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// partitions lists readings' partitions in bound order, straight from
// the catalog.
func partitions(t *testing.T, d *db.DB) []string {
	t.Helper()
	rows, err := d.SQL().QueryContext(t.Context(), `SELECT c.relname FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'readings'::regclass
		ORDER BY c.relname = 'readings_past' DESC, c.relname = 'readings_future', c.relname`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// setLayout replaces the empty readings' partitions with past up to
// first, n days, and the future: the layout of a server that has run
// since first.
func setLayout(t *testing.T, d *db.DB, first time.Time, n int) {
	t.Helper()
	if c := count(t, d, "SELECT count(*) FROM readings"); c != 0 {
		t.Fatalf("setLayout on a readings table with %d rows", c)
	}
	tx, err := d.SQL().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, p := range partitions(t, d) {
		exec(t, tx, "DROP TABLE "+p)
	}
	for _, p := range testLayout(first, n) {
		lo, hi := "MINVALUE", "MAXVALUE"
		if !p.lo.IsZero() {
			lo = literal(p.lo)
		}
		if !p.hi.IsZero() {
			hi = literal(p.hi)
		}
		exec(t, tx, fmt.Sprintf("CREATE TABLE %s PARTITION OF readings FOR VALUES FROM (%s) TO (%s) WITH (%s)",
			p.name, lo, hi, storageParams))
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// fill writes a reading every step in [from, to] for every test series;
// value is the time in Unix seconds.
func fill(t *testing.T, d *db.DB, from, to time.Time, step time.Duration) int64 {
	t.Helper()
	return exec(t, d.SQL(), `INSERT INTO readings (time, agent_uuid, metric_name, value, tenant_id)
		SELECT ts, a::uuid, m, extract(epoch FROM ts), 'tenant-a'
		FROM generate_series($1::timestamptz, $2::timestamptz, $3::interval) ts,
		     unnest($4::text[]) a, unnest($5::text[]) m`,
		from, to, fmt.Sprintf("%d seconds", int(step.Seconds())), "{"+strings.Join(testAgents, ",")+"}",
		"{"+strings.Join(testMetrics, ",")+"}")
}

// countDeletes makes every row deleted from readings, any partition, now
// or made later, count in deleted_rows.
func countDeletes(t *testing.T, d *db.DB) {
	t.Helper()
	exec(t, d.SQL(), `CREATE TABLE deleted_rows (n int)`)
	exec(t, d.SQL(), `CREATE FUNCTION count_delete() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN INSERT INTO deleted_rows VALUES (1); RETURN OLD; END $$`)
	exec(t, d.SQL(), `CREATE TRIGGER count_delete AFTER DELETE ON readings FOR EACH ROW EXECUTE FUNCTION count_delete()`)
}

func newTestMaintainer(t *testing.T, d *db.DB, retention time.Duration, now time.Time) *Maintainer {
	return New(d, retention, Options{Now: func() time.Time { return now }, Pause: time.Millisecond,
		Log: slog.New(slog.NewTextHandler(t.Output(), nil))})
}

// digest sums up the rows at or after from: count, value sum, and a hash
// of every key and value in key order.
func digest(t *testing.T, d *db.DB, from time.Time) string {
	t.Helper()
	var n int64
	var sum float64
	var hash string
	if err := d.SQL().QueryRowContext(t.Context(), `SELECT count(*), coalesce(sum(value), 0),
		md5(coalesce(string_agg(agent_uuid::text || metric_name || time::text || coalesce(value::text, ''), ',' ORDER BY agent_uuid, metric_name, time), ''))
		FROM readings WHERE time >= $1`, from).Scan(&n, &sum, &hash); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d rows, sum %.0f, md5 %s", n, sum, hash)
}

// TestRetentionDropsPartitionsIntegration: 60 days of readings in daily
// partitions; a 30-day retention drops the 30 oldest days and the past
// whole, deleting no row, and leaves every row of the days it keeps.
func TestRetentionDropsPartitionsIntegration(t *testing.T) {
	d := dbtest.Migrated(t, "postgres")
	now := time.Now().UTC()
	today := now.Truncate(day)
	first := today.Add(-60 * day)
	setLayout(t, d, first, 60+DefaultAhead+1)
	countDeletes(t, d)
	total := fill(t, d, first, now, 30*time.Minute)
	keepFrom := now.Add(-DefaultRetention).Truncate(day) // the first day kept
	kept := count(t, d, "SELECT count(*) FROM readings WHERE time >= $1", keepFrom)
	if kept == 0 || kept == total {
		t.Fatalf("fixture: %d rows, %d of them kept", total, kept)
	}
	want := digest(t, d, keepFrom)
	before := partitions(t, d)

	m := newTestMaintainer(t, d, DefaultRetention, now)
	res, err := m.Maintain(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	after := partitions(t, d)
	t.Logf("partitions before (%d): %s", len(before), strings.Join(before, " "))
	t.Logf("partitions after (%d): %s", len(after), strings.Join(after, " "))
	t.Logf("result: mode %s, dropped %d, created %d, moved %d, deleted %d", res.Mode, len(res.Dropped), len(res.Created), res.Moved, res.Deleted)

	if res.Mode != ModePartitions || res.Skipped {
		t.Fatalf("mode %s, skipped %v; want partitions", res.Mode, res.Skipped)
	}
	wantDropped := []string{pastName}
	for i := range 30 {
		wantDropped = append(wantDropped, dayName(first.Add(time.Duration(i)*day)))
	}
	if !reflect.DeepEqual(res.Dropped, wantDropped) {
		t.Errorf("dropped %v, want %v", res.Dropped, wantDropped)
	}
	wantAfter := append([]string{pastName}, before[31:]...)
	if !reflect.DeepEqual(after, wantAfter) || !reflect.DeepEqual(res.After, wantAfter) {
		t.Errorf("partitions after %v (result says %v), want %v", after, res.After, wantAfter)
	}
	if got := count(t, d, "SELECT count(*) FROM readings"); got != kept {
		t.Errorf("%d rows left, want the %d of the kept days (of %d)", got, kept, total)
	}
	if got := digest(t, d, keepFrom); got != want {
		t.Errorf("kept days changed: %s, was %s", got, want)
	}
	if n := count(t, d, "SELECT count(*) FROM deleted_rows"); n != 0 || res.Deleted != 0 {
		t.Errorf("%d rows deleted one by one (result says %d), want none", n, res.Deleted)
	}
	// The trigger does see a DELETE, so the zero above means something.
	exec(t, d.SQL(), "DELETE FROM readings WHERE time = (SELECT min(time) FROM readings)")
	if n := count(t, d, "SELECT count(*) FROM deleted_rows"); n != int64(len(testAgents)*len(testMetrics)) {
		t.Errorf("control DELETE counted %d rows, want %d", n, len(testAgents)*len(testMetrics))
	}

	// The next round has nothing to do.
	res, err = m.Maintain(t.Context())
	if err != nil || len(res.Dropped)+len(res.Created) != 0 || res.Moved != 0 {
		t.Errorf("second round = %+v, %v; want nothing done", res, err)
	}
}

// stage writes rows as the ingest role does: COPY into a staging table,
// then one INSERT ... SELECT ... ON CONFLICT DO NOTHING. It returns the
// rows inserted.
func stage(t *testing.T, d *db.DB, times []time.Time) int64 {
	t.Helper()
	tx, err := d.SQL().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	exec(t, tx, "CREATE TEMP TABLE readings_in (LIKE readings INCLUDING DEFAULTS) ON COMMIT DROP")
	for _, ts := range times {
		exec(t, tx, `INSERT INTO readings_in (time, agent_uuid, metric_name, value, tenant_id) VALUES ($1, $2, 'boiler.temp', 1, 'tenant-a')`,
			ts, testAgents[0])
	}
	n := exec(t, tx, `INSERT INTO readings (time, agent_uuid, metric_name, value, tenant_id)
		SELECT time, agent_uuid, metric_name, value, tenant_id FROM readings_in ON CONFLICT DO NOTHING`)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return n
}

// partitionOf names the partition holding the test series' row at ts, ""
// when there is none.
func partitionOf(t *testing.T, d *db.DB, ts time.Time) string {
	t.Helper()
	var name string
	err := d.SQL().QueryRowContext(t.Context(), `SELECT tableoid::regclass::text FROM readings
		WHERE agent_uuid = $1 AND metric_name = 'boiler.temp' AND time = $2`, testAgents[0], ts).Scan(&name)
	if err == sql.ErrNoRows {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// TestOutsidePartitionsIntegration: readings far in the past, far in the
// future and just past the days made ahead are all stored, a resent one
// stays a no-op, and maintenance later moves the one whose day it makes.
func TestOutsidePartitionsIntegration(t *testing.T) {
	d := dbtest.Migrated(t, "postgres")
	now := time.Now().UTC().Truncate(time.Microsecond)
	today := now.Truncate(day)
	farPast := time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)
	farFuture := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
	soon := now.Add(10 * day) // after the days migration 0021 made
	times := []time.Time{farPast, now, soon, farFuture}

	if n := stage(t, d, times); n != 4 {
		t.Fatalf("stored %d of 4 readings", n)
	}
	if n := stage(t, d, times); n != 0 {
		t.Fatalf("resending stored %d readings again, want 0", n)
	}
	for ts, want := range map[time.Time]string{farPast: pastName, now: pastName, soon: futureName, farFuture: futureName} {
		if got := partitionOf(t, d, ts); got != want {
			t.Errorf("reading at %s is in %q, want %s", ts, got, want)
		}
	}

	// Five days on, without retention: the days up to 8 days later are
	// made, and the reading readings_future held moves into its day.
	res, err := newTestMaintainer(t, d, 0, now.Add(5*day)).Maintain(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("partitions: %s", strings.Join(res.After, " "))
	if res.Moved != 2 || len(res.Created) == 0 || len(res.Dropped) != 0 {
		t.Errorf("moved %d (want the 2 of readings_future), created %v, dropped %v", res.Moved, res.Created, res.Dropped)
	}
	if got, want := partitionOf(t, d, soon), dayName(soon.Truncate(day)); got != want {
		t.Errorf("reading at %s is in %q, want %s", soon, got, want)
	}
	if got := partitionOf(t, d, farFuture); got != futureName {
		t.Errorf("reading at %s is in %q, want %s", farFuture, got, futureName)
	}
	if n := stage(t, d, times); n != 0 {
		t.Fatalf("resending after the move stored %d readings again, want 0", n)
	}

	// Forty days on with the default retention: the past (1990, today)
	// and the days up to 10 days from now go; the day of soon stays.
	res, err = newTestMaintainer(t, d, DefaultRetention, now.Add(40*day)).Maintain(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("partitions: %s", strings.Join(res.After, " "))
	if !slices.Contains(res.Dropped, pastName) || res.After[1] != dayName(today.Add(10*day)) {
		t.Errorf("dropped %v, partitions after %v; want the past dropped and %s first of the days",
			res.Dropped, res.After, dayName(today.Add(10*day)))
	}
	for ts, want := range map[time.Time]string{farPast: "", now: "", soon: dayName(soon.Truncate(day)), farFuture: futureName} {
		if got := partitionOf(t, d, ts); got != want {
			t.Errorf("reading at %s is in %q, want %q", ts, got, want)
		}
	}
	// Late readings older than the retention are still taken (into the
	// past, which the next round drops); the kept ones stay no-ops.
	if n := stage(t, d, times); n != 2 {
		t.Errorf("resending stored %d readings, want the 2 dropped ones", n)
	}
}

// TestMaintainSkipsWhileLockedIntegration: a replica that finds the
// advisory lock taken does nothing this round.
func TestMaintainSkipsWhileLockedIntegration(t *testing.T) {
	d := dbtest.Migrated(t, "postgres")
	tx, err := d.SQL().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	exec(t, tx, "SELECT pg_advisory_xact_lock($1)", lockKey)
	before := partitions(t, d)
	res, err := newTestMaintainer(t, d, DefaultRetention, time.Now().Add(20*day)).Maintain(t.Context())
	if err != nil || !res.Skipped {
		t.Fatalf("maintain while locked = %+v, %v; want skipped", res, err)
	}
	if after := partitions(t, d); !reflect.DeepEqual(after, before) {
		t.Errorf("partitions changed while skipped: %v -> %v", before, after)
	}
	_ = tx.Rollback()
	if res, err := newTestMaintainer(t, d, DefaultRetention, time.Now().Add(20*day)).Maintain(t.Context()); err != nil || res.Skipped || len(res.Created) == 0 {
		t.Fatalf("maintain after the lock = %+v, %v; want days created", res, err)
	}
}
