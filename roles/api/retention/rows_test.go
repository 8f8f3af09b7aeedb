package retention

import (
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
)

// insertSeries writes n readings of one series, a second apart from
// start, in one transaction.
func insertSeries(t *testing.T, d *db.DB, agent, metric string, start time.Time, n int) {
	t.Helper()
	tx, err := d.SQL().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for i := range n {
		exec(t, tx, `INSERT INTO readings (time, agent_uuid, metric_name, value, tenant_id) VALUES ($1, $2, $3, $4, 'tenant-a')`,
			d.Dialect().TimeArg(start.Add(time.Duration(i)*time.Second)), agent, metric, float64(i))
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// unpartition turns a migrated PostgreSQL readings into one plain table,
// as it stays where TimescaleDB was available but could not be created.
func unpartition(t *testing.T, d *db.DB) {
	t.Helper()
	exec(t, d.SQL(), "ALTER TABLE readings RENAME TO readings_partitioned")
	exec(t, d.SQL(), "CREATE TABLE readings (LIKE readings_partitioned INCLUDING DEFAULTS, PRIMARY KEY (agent_uuid, metric_name, time))")
}

// TestDeleteRowsIntegration: on SQLite, and on PostgreSQL without
// partitions, retention deletes exactly the rows older than it, in
// batches, series by series.
func TestDeleteRowsIntegration(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			d := dbtest.Migrated(t, engine)
			if engine == "postgres" {
				unpartition(t, d)
			}
			now := time.Now().UTC().Truncate(time.Second)
			old := now.Add(-40 * day)
			recent := now.Add(-time.Hour)
			const batch = 500
			// The first series needs several full batches, the second
			// ends on a batch boundary, the third has nothing old.
			insertSeries(t, d, testAgents[0], "boiler.temp", old, 3*batch+7)
			insertSeries(t, d, testAgents[0], "boiler.temp", recent, 11)
			insertSeries(t, d, testAgents[0], "pump.speed", old, batch)
			insertSeries(t, d, testAgents[0], "pump.speed", recent, 3)
			insertSeries(t, d, testAgents[1], "boiler.temp", recent, 5)
			m := New(d, DefaultRetention, Options{Now: func() time.Time { return now }, Batch: batch, Pause: time.Millisecond})
			res, err := m.Maintain(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if res.Mode != ModeRows || res.Deleted != 4*batch+7 {
				t.Errorf("mode %s, deleted %d; want rows, %d", res.Mode, res.Deleted, 4*batch+7)
			}
			if n := count(t, d, "SELECT count(*) FROM readings"); n != 19 {
				t.Errorf("%d rows left, want the 19 recent ones", n)
			}
			if n := count(t, d, "SELECT count(*) FROM readings WHERE time < $1", d.Dialect().TimeArg(now.Add(-DefaultRetention))); n != 0 {
				t.Errorf("%d old rows left", n)
			}
			res, err = m.Maintain(t.Context())
			if err != nil || res.Deleted != 0 {
				t.Errorf("second round = %+v, %v; want nothing deleted", res, err)
			}
			// No retention deletes nothing.
			insertSeries(t, d, testAgents[1], "boiler.temp", old, 3)
			if res, err := New(d, 0, Options{}).Maintain(t.Context()); err != nil || res.Deleted != 0 {
				t.Errorf("retention 0 = %+v, %v; want nothing deleted", res, err)
			}
		})
	}
}
