package events

import "github.com/prometheus/client_golang/prometheus"

// Metrics count the log's writes and pruning (docs/metrics.md).
type Metrics struct {
	snapshots *prometheus.CounterVec
	pruned    *prometheus.CounterVec
	pruneErrs prometheus.Counter
}

// NewMetrics registers the package's metrics on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_events_state_snapshots_total",
			Help: "Agent state reports seen by the event log, by outcome: stored (the state changed), unchanged, unknown_agent."},
			[]string{"outcome"}),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_events_pruned_total",
			Help: "Event log rows deleted as older than api.events_retention, by table."}, []string{"table"}),
		pruneErrs: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_events_prune_errors_total",
			Help: "Event log pruning rounds that failed."}),
	}
	if reg != nil {
		reg.MustRegister(m.snapshots, m.pruned, m.pruneErrs)
	}
	return m
}
