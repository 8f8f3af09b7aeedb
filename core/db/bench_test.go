package db

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/edgeplat/edgeplat/core/coretest"
)

const benchRows = 10_000

// benchReadings makes the iter'th batch: 10 agents x 100 metrics x 10
// times, with times unique per batch so every row is a real insert, and in
// primary-key order as the ingest path sorts them.
func benchReadings(iter int) (times []time.Time, agents []string, metrics []string) {
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(iter) * time.Minute)
	for i := range benchRows {
		agents = append(agents, fmt.Sprintf("00000000-0000-4000-8000-%012d", i/1000))
		metrics = append(metrics, fmt.Sprintf("dev%d.m%d", (i/100)%10, (i/10)%10))
		times = append(times, base.Add(time.Duration(i%10)*time.Second))
	}
	return times, agents, metrics
}

func reportRows(b *testing.B, batches int) {
	b.ReportMetric(float64(batches*benchRows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkInsert10k compares the two hot-path inserts: pgx CopyFrom on
// PostgreSQL and one transaction of prepared inserts on SQLite, 10,000
// readings per operation.
func BenchmarkInsert10k(b *testing.B) {
	b.Run("postgres-copy", func(b *testing.B) {
		d := migratedDB(b, coretest.Postgres(b))
		ctx := context.Background()
		batches := 0
		for b.Loop() {
			times, agents, metrics := benchReadings(batches)
			uuids := make([]pgtype.UUID, len(agents))
			for i, a := range agents {
				if err := uuids[i].Scan(a); err != nil {
					b.Fatal(err)
				}
			}
			n, err := d.Pool().CopyFrom(ctx, pgx.Identifier{"readings"}, readingColumns,
				pgx.CopyFromSlice(benchRows, func(i int) ([]any, error) {
					return []any{times[i], uuids[i], metrics[i], float64(i), "modbus", "C", "GOOD", "dev", "t1"}, nil
				}))
			if err != nil || n != benchRows {
				b.Fatalf("copy = %d, %v", n, err)
			}
			batches++
		}
		reportRows(b, batches)
	})
	b.Run("sqlite-tx", func(b *testing.B) {
		d := migratedDB(b, coretest.SQLite(b))
		ctx := context.Background()
		batches := 0
		for b.Loop() {
			times, agents, metrics := benchReadings(batches)
			tx, err := d.SQL().BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			stmt, err := tx.PrepareContext(ctx, insertReading)
			if err != nil {
				b.Fatal(err)
			}
			for i := range benchRows {
				if _, err := stmt.ExecContext(ctx, times[i].UnixMicro(), agents[i], metrics[i], float64(i),
					"modbus", "C", "GOOD", "dev", "t1"); err != nil {
					b.Fatal(err)
				}
			}
			if err := stmt.Close(); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			batches++
		}
		reportRows(b, batches)
	})
}
