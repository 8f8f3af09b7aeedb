package db

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// migrationsUpTo is the engine's embedded migrations up to version last,
// as an older binary carried them.
func migrationsUpTo(t *testing.T, e Engine, last int) fs.FS {
	t.Helper()
	dir := "migrations/" + string(e)
	entries, err := fs.ReadDir(embeddedMigrations, dir)
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, en := range entries {
		if en.Name() > fmt.Sprintf("%04d_~", last) {
			continue
		}
		b, err := fs.ReadFile(embeddedMigrations, path.Join(dir, en.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[path.Join(dir, en.Name())] = &fstest.MapFile{Data: b}
	}
	return out
}

// readingsDigest sums readings up: count, and a hash of every row in key
// order.
func readingsDigest(t *testing.T, d *DB) string {
	t.Helper()
	var n int64
	var hash string
	if err := d.SQL().QueryRowContext(testCtx(t), `SELECT count(*), md5(coalesce(string_agg(
		concat_ws('|', agent_uuid, metric_name, time, value, protocol, unit, quality, device_name, tenant_id, anomaly_score),
		',' ORDER BY agent_uuid, metric_name, time), '')) FROM readings`).Scan(&n, &hash); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d rows, md5 %s", n, hash)
}

// TestPartitionUpgradeIntegration: a database at version 0020 holding
// readings from 90 days ago to 30 days ahead is migrated to 0021: every
// row is kept, the existing table becomes readings_past without a copy
// (same relfilenode), and rows stamped after today move to their day or
// to readings_future. A resent reading stays a no-op.
func TestPartitionUpgradeIntegration(t *testing.T) {
	d := openDB(t, coretest.Postgres(t))
	ctx := testCtx(t)
	if _, err := d.MigrateFS(ctx, migrationsUpTo(t, Postgres, 20), "migrations/postgres"); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := d.SQL().ExecContext(ctx, `INSERT INTO readings (time, agent_uuid, metric_name, value, unit, quality, tenant_id, anomaly_score)
		SELECT $1::timestamptz + g * interval '17 minutes', $2, 'm' || (g % 3), g, 'bar', 'good', 'tenant-a', CASE WHEN g % 5 = 0 THEN 0.5 END
		FROM generate_series(-90 * 24 * 60 / 17, 30 * 24 * 60 / 17) g`, now, testAgent); err != nil {
		t.Fatal(err)
	}
	var ahead int64
	tomorrow := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	if err := d.SQL().QueryRowContext(ctx, "SELECT count(*) FROM readings WHERE time >= $1", tomorrow).Scan(&ahead); err != nil {
		t.Fatal(err)
	}
	want := readingsDigest(t, d)
	var fileBefore uint32
	if err := d.SQL().QueryRowContext(ctx, "SELECT relfilenode FROM pg_class WHERE relname = 'readings'").Scan(&fileBefore); err != nil {
		t.Fatal(err)
	}

	res, err := d.Migrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Applied) == 0 || res.Applied[0] != "0021_readings_partitions" {
		t.Fatalf("applied %v, want 0021 first", res.Applied)
	}
	if want := map[bool]string{false: StoragePartitioned, true: StorageHypertable}[d.Dialect().Timescale]; res.Storage != want {
		t.Fatalf("storage %s, want %s", res.Storage, want)
	}
	if got := readingsDigest(t, d); got != want {
		t.Fatalf("after 0021: %s, before: %s", got, want)
	}
	if res.Storage != StoragePartitioned {
		return
	}
	var filePast uint32
	if err := d.SQL().QueryRowContext(ctx, "SELECT relfilenode FROM pg_class WHERE relname = 'readings_past'").Scan(&filePast); err != nil {
		t.Fatal(err)
	}
	if filePast != fileBefore {
		t.Errorf("readings_past is file %d, the old readings was %d: the table was copied", filePast, fileBefore)
	}
	rows, err := d.SQL().QueryContext(ctx, `SELECT tableoid::regclass::text, count(*), min(time), max(time) FROM readings GROUP BY 1 ORDER BY 3`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var moved int64
	for rows.Next() {
		var part string
		var n int64
		var lo, hi time.Time
		if err := rows.Scan(&part, &n, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		t.Logf("%-20s %6d rows %s .. %s", part, n, lo.UTC().Format(time.RFC3339), hi.UTC().Format(time.RFC3339))
		switch {
		case part == "readings_past":
			if !hi.Before(tomorrow) {
				t.Errorf("readings_past holds a row at %s, after %s", hi, tomorrow)
			}
		case part == "readings_future" || strings.HasPrefix(part, "readings_p"):
			if lo.Before(tomorrow) {
				t.Errorf("%s holds a row at %s, before %s", part, lo, tomorrow)
			}
			if day := "readings_p" + lo.UTC().Format("20060102"); part != "readings_future" && part != day {
				t.Errorf("a row at %s is in %s, want %s", lo, part, day)
			}
			moved += n
		default:
			t.Errorf("rows in %s", part)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if moved != ahead {
		t.Errorf("%d rows after today are in daily or future partitions, want %d", moved, ahead)
	}
	// A resent sample of each kind is still ignored.
	for _, ts := range []time.Time{now.Add(-60 * 24 * time.Hour), now.Add(20 * 24 * time.Hour)} {
		r, err := d.SQL().ExecContext(ctx, `INSERT INTO readings (time, agent_uuid, metric_name, value)
			SELECT time, agent_uuid, metric_name, value FROM readings WHERE time >= $1 ORDER BY time LIMIT 1
			ON CONFLICT DO NOTHING`, ts)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := r.RowsAffected(); n != 0 {
			t.Errorf("resending the reading after %s inserted %d rows", ts, n)
		}
	}
}
