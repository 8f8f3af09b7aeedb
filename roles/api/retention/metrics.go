package retention

import "github.com/prometheus/client_golang/prometheus"

// Metrics count what maintenance did (docs/metrics.md).
type Metrics struct {
	created prometheus.Counter
	dropped prometheus.Counter
	moved   prometheus.Counter
	deleted prometheus.Counter
	errs    prometheus.Counter
}

// NewMetrics registers the package's metrics on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		created: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_readings_partitions_created_total",
			Help: "Daily partitions of readings made ahead by partition maintenance."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_readings_partitions_dropped_total",
			Help: "Partitions of readings (or TimescaleDB chunks) dropped as entirely older than api.readings_retention."}),
		moved: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_readings_rows_moved_total",
			Help: "Readings moved from readings_future into the daily partitions made for them."}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_readings_retention_rows_deleted_total",
			Help: "Readings deleted row by row as older than api.readings_retention (SQLite, unpartitioned PostgreSQL)."}),
		errs: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_readings_maintenance_errors_total",
			Help: "Readings partition maintenance and retention rounds that failed."}),
	}
	if reg != nil {
		reg.MustRegister(m.created, m.dropped, m.moved, m.deleted, m.errs)
	}
	return m
}
