package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/agent/anomaly/detect"
)

// Baselines is the anomaly_baselines table: the anomaly detector's
// baselines (docs/anomaly-agent.md, section Persistence).
type Baselines struct {
	db   *db.DB
	cond *condition
}

// Baselines is the anomaly detector's saved baselines.
func (s *Store) Baselines() *Baselines { return &Baselines{db: s.db, cond: s.cond} }

// AnomalyBaselines returns the saved baselines.
func (s *Baselines) AnomalyBaselines(ctx context.Context) (_ []detect.Baseline, err error) {
	defer s.cond.observe(&err)
	rows, err := s.db.SQL().QueryContext(ctx, `SELECT metric, device_id, time_slot, mean, std_dev, median, mad,
		sample_count, calculated_at FROM anomaly_baselines ORDER BY metric, device_id, time_slot`)
	if err != nil {
		return nil, fmt.Errorf("read anomaly baselines: %w", err)
	}
	var out []detect.Baseline
	for rows.Next() {
		var b detect.Baseline
		var at int64
		if err := rows.Scan(&b.Metric, &b.DeviceID, &b.TimeSlot, &b.Mean, &b.StdDev, &b.Median, &b.MAD, &b.SampleCount, &at); err != nil {
			_ = rows.Close()
			return nil, fmt.Errorf("read anomaly baselines: %w", err)
		}
		b.CalculatedAt = time.UnixMilli(at).UTC()
		out = append(out, b)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("read anomaly baselines: %w", err)
	}
	return out, nil
}

// SaveAnomalyBaselines replaces the saved baselines with bs in one
// transaction: a series the detector evicted is gone from the store too.
func (s *Baselines) SaveAnomalyBaselines(ctx context.Context, bs []detect.Baseline) (err error) {
	defer s.cond.observe(&err)
	tx, err := s.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save anomaly baselines: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `DELETE FROM anomaly_baselines`); err != nil {
		return fmt.Errorf("save anomaly baselines: %w", err)
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO anomaly_baselines (metric, device_id, time_slot, mean, std_dev, median, mad,
		sample_count, calculated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`)
	if err != nil {
		return fmt.Errorf("save anomaly baselines: %w", err)
	}
	defer ins.Close()
	for _, b := range bs {
		if _, err := ins.ExecContext(ctx, b.Metric, b.DeviceID, b.TimeSlot, b.Mean, b.StdDev, b.Median, b.MAD,
			b.SampleCount, b.CalculatedAt.UnixMilli()); err != nil {
			return fmt.Errorf("save anomaly baseline %s/%s/%d: %w", b.Metric, b.DeviceID, b.TimeSlot, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("save anomaly baselines: %w", err)
	}
	return nil
}
