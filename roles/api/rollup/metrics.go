package rollup

import "github.com/prometheus/client_golang/prometheus"

// metrics are the worker's series (docs/metrics.md).
type metrics struct {
	rounds  *prometheus.CounterVec
	buckets *prometheus.CounterVec
	deleted *prometheus.CounterVec
	lag     prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_rollup_rounds_total",
			Help: "Rollup worker rounds, by result: done, skipped (another replica held the lock), failed."}, []string{"result"}),
		buckets: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_rollup_buckets_total",
			Help: "Hours and days rolled up, by table (hourly, daily) and reason (new: first time; late: again, for late readings)."},
			[]string{"table", "reason"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_rollup_deleted_total",
			Help: "Rollup rows deleted as older than their retention, by table (hourly, daily)."}, []string{"table"}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_api_rollup_lag_seconds",
			Help: "Age of the end of the hourly rollup: reads of newer hours use raw readings."}),
	}
	if reg != nil {
		reg.MustRegister(m.rounds, m.buckets, m.deleted, m.lag)
	}
	return m
}
