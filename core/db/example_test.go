package db_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/db"
)

// Start-up as a role does it: open, migrate, then write portable SQL with
// the dialect's time argument.
func Example() {
	dir, err := os.MkdirTemp("", "edgeplat-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	d, err := db.Open(ctx, config.DB{Driver: "sqlite", SQLitePath: filepath.Join(dir, "edgeplat.db"), PoolSize: 4}, nil)
	if err != nil {
		panic(err)
	}
	defer d.Close()
	res, err := d.Migrate(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Dialect(), res.Storage, res.Applied)

	ts := d.Dialect().TimeArg(time.Date(2024, 3, 10, 10, 7, 0, 0, time.UTC))
	for range 2 { // the second insert is a resent sample: ignored
		_, err = d.SQL().ExecContext(ctx, `INSERT INTO readings (time, agent_uuid, metric_name, value)
			VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, ts, "3f2b8c1e-9d4a-4b7e-8f00-1a2b3c4d5e6f", "press.temp", 21.5)
		if err != nil {
			panic(err)
		}
	}
	bucket, err := d.Dialect().TimeBucket(15*time.Minute, "time")
	if err != nil {
		panic(err)
	}
	var start db.Timestamp
	var n int
	err = d.ReadSQL().QueryRowContext(ctx, "SELECT "+bucket+" AS b, count(*) FROM readings GROUP BY b").Scan(&start, &n)
	if err != nil {
		panic(err)
	}
	fmt.Println(start.Format(time.RFC3339), n)
	// Output:
	// sqlite sqlite [0001_readings 0002_agent_logs 0003_agent_logs_entry_key 0004_agent_reports 0005_accounts 0006_target_state 0007_broker_users 0008_provisioning_key_agent 0009_installation_id 0010_agent_status 0011_target_secrets 0012_fleets 0013_jobs 0014_dashboard_layouts 0015_target_state_history 0016_anomaly 0017_readings_anomaly_score 0018_agent_state_snapshots 0019_export_jobs 0020_system_config 0021_readings_partitions 0022_readings_rollups]
	// 2024-03-10T10:00:00Z 1
}
