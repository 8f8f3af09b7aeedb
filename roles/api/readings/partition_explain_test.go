package readings

import (
	"database/sql"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPartitionPruningIntegration: on PostgreSQL's daily partitions of
// readings (migration 0021, docs/database.md), the readings API's main
// statements read only the partitions of their time range, through each
// partition's primary key, and the newest-row probe of each series reads
// the partitions newest first (an ordered Append, not a Merge Append over
// all of them). Each statement also runs, in one transaction, so the
// table statistics show index scans and no sequential scan.
func TestPartitionPruningIntegration(t *testing.T) {
	d := integrationDB(t, "postgres")
	ctx := t.Context()
	var parted bool
	if err := d.SQL().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_partitioned_table
		WHERE partrelid = 'readings'::regclass)`).Scan(&parted); err != nil {
		t.Fatal(err)
	}
	if !parted {
		t.Skip("readings is not partitioned here (TimescaleDB's hypertable does it)")
	}
	// Readings every 15 minutes for 20 agents and 3 metrics from a day
	// ago to a day into readings_future, so every partition holds rows,
	// and every minute on the day the statements ask about, so that
	// reading its part of a series through the key beats reading the day.
	today := time.Now().UTC().Truncate(24 * time.Hour)
	day := today.Add(3 * 24 * time.Hour)
	part := "readings_p" + day.Format("20060102")
	for _, step := range []struct {
		from, to time.Time
		every    string
	}{
		{today.Add(-24 * time.Hour), today.Add(10 * 24 * time.Hour), "15 minutes"},
		{day.Add(time.Minute), day.Add(24*time.Hour - time.Minute), "1 minute"},
	} {
		if _, err := d.SQL().ExecContext(ctx, `INSERT INTO readings (time, agent_uuid, metric_name, value, tenant_id)
			SELECT ts, ('00000000-0000-4000-8000-0000000000' || lpad(a::text, 2, '0'))::uuid, 'metric.' || m, extract(epoch FROM ts), $4
			FROM generate_series($1::timestamptz, $2::timestamptz, $3::interval) ts,
			     generate_series(10, 29) a, generate_series(1, 3) m
			ON CONFLICT DO NOTHING`, step.from, step.to, step.every, tenantA); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.SQL().ExecContext(ctx, "ANALYZE readings"); err != nil {
		t.Fatal(err)
	}
	dl := d.Dialect()
	agent := "00000000-0000-4000-8000-000000000012"
	hourly, err := dl.TimeBucket(time.Hour, "r.time")
	if err != nil {
		t.Fatal(err)
	}
	daily, err := dl.TimeBucket(24*time.Hour, "r.time")
	if err != nil {
		t.Fatal(err)
	}
	type stmt struct {
		name  string
		sql   string
		args  []any
		parts []string // partitions the plan may read; nil: any
		// keyOnly: the range is read through the key. The stats read
		// whole days, which the planner may scan instead (so it does on
		// one unpartitioned table, there the whole table), as its
		// estimate of the walked series is a guess.
		keyOnly bool
	}
	var stmts []stmt
	add := func(name string, parts []string, keyOnly bool, sql string, args []any) {
		stmts = append(stmts, stmt{name: name, sql: sql, args: args, parts: parts, keyOnly: keyOnly})
	}
	lo, hi := day.Add(6*time.Hour), day.Add(7*time.Hour)
	s, a := rawSQL(tenantA, agent, "metric.3", lo, hi, 1000)
	add("range read", []string{part}, true, s, a)
	s, a = latestSQL(dl, tenantA, seriesFilter{agent: agent}, false, 100)
	add("latest", nil, true, s, a)
	s, a = bucketSQL(dl, tenantA, seriesFilter{agent: agent}, hourly, day, day.Add(24*time.Hour-time.Microsecond), 1000)
	add("hourly stats", []string{part}, false, s, a)
	// A week around the day: readings_past holds today and before.
	var week []string
	for i := -3; i <= 3; i++ {
		name := "readings_p" + day.Add(time.Duration(i)*24*time.Hour).Format("20060102")
		if i == -3 {
			name = "readings_past"
		}
		week = append(week, name)
	}
	s, a = bucketSQL(dl, tenantA, seriesFilter{agent: agent}, daily, day.Add(-3*24*time.Hour), day.Add(4*24*time.Hour-time.Microsecond), 1000)
	add("daily stats", week, false, s, a)

	tx, err := d.SQL().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, st := range stmts {
		plan := explain(t, tx, st.sql, st.args)
		t.Logf("%s:\n%s", st.name, plan)
		ranged := 0
		for _, sc := range scans(plan) {
			// The series walk has no time range and reads every
			// partition; the reads of the asked range must be pruned to
			// its days and go through the key.
			if st.parts == nil || !strings.Contains(sc.cond, `"time" >=`) {
				continue
			}
			ranged++
			if !slices.Contains(st.parts, sc.part) {
				t.Errorf("%s: reads %s, outside its range %v", st.name, sc.part, st.parts)
			}
			if st.keyOnly && sc.kind == "Seq Scan" {
				t.Errorf("%s: %s of %s, want the primary key", st.name, sc.kind, sc.part)
			}
		}
		if st.parts != nil && ranged == 0 {
			t.Errorf("%s: no read of the range found in the plan", st.name)
		}
		if st.name == "latest" {
			// The newest time of a series: partitions newest first, the
			// first that has the series ends the scan. A DEFAULT
			// partition would make this a Merge Append of all of them.
			if regexp.MustCompile(`Sort Key: r_\d+\."time" DESC\n`).MatchString(plan) {
				t.Errorf("latest: a Merge Append by time over the partitions")
			}
			if !strings.Contains(plan, "Index Only Scan Backward using "+part+"_pkey") {
				t.Errorf("latest: no backward key scan of %s", part)
			}
		}
		rows, err := tx.QueryContext(ctx, st.sql, st.args...)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil || n == 0 {
			t.Errorf("%s: %d rows, %v", st.name, n, err)
		}
		rows.Close()
		if st.name == "latest" {
			xactScans(t, tx, part)
		}
	}
	// The primary key is readings' only index, one per partition: it is
	// the ON CONFLICT key, and the walks and range reads above use it.
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT regexp_replace(i.indexrelname, '^readings_(p[0-9]{8}|past|future)_', '')
		FROM pg_stat_user_indexes i JOIN pg_inherits h ON h.inhrelid = i.relid
		WHERE h.inhparent = 'readings'::regclass`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var kinds []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kinds, []string{"pkey"}) {
		t.Errorf("indexes of readings' partitions: %v, want the primary key alone", kinds)
	}
}

// xactScans checks the transaction's statistics: part was read by
// index only.
func xactScans(t *testing.T, tx *sql.Tx, part string) {
	t.Helper()
	ctx := t.Context()
	var idx, seq int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(idx_scan, 0), coalesce(seq_scan, 0) FROM pg_stat_xact_user_tables
		WHERE relname = $1`, part).Scan(&idx, &seq); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s in this transaction: %d index scans, %d sequential scans", part, idx, seq)
	if idx == 0 || seq != 0 {
		t.Errorf("%s: %d index scans, %d sequential scans; want index scans only", part, idx, seq)
	}
}

func explain(t *testing.T, tx *sql.Tx, query string, args []any) string {
	t.Helper()
	rows, err := tx.QueryContext(t.Context(), "EXPLAIN (COSTS OFF) "+query, args...)
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, query)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// scan is one read of a partition in a plan: its kind, the partition and
// its conditions and filter.
type scan struct{ kind, part, cond string }

var scanRE = regexp.MustCompile(`(Seq Scan|Index Scan|Index Only Scan|Bitmap Heap Scan)(?: Backward)?(?: using \S+)? on (readings_(?:p\d{8}|past|future))\b`)

func scans(plan string) []scan {
	var out []scan
	for _, line := range strings.Split(plan, "\n") {
		if m := scanRE.FindStringSubmatch(line); m != nil {
			out = append(out, scan{kind: m[1], part: m[2]})
			continue
		}
		if strings.Contains(line, "->") {
			continue
		}
		if n := len(out); n > 0 && (strings.Contains(line, "Cond:") || strings.Contains(line, "Filter:")) {
			out[n-1].cond += line
		}
	}
	return out
}
