package api

import "github.com/prometheus/client_golang/prometheus"

// statusMetrics count the agent-status work: lastSeen flushes and status
// changes. Labels are bounded (outcome, one of four statuses).
type statusMetrics struct {
	seenFlushes *prometheus.CounterVec
	changes     *prometheus.CounterVec
	eventErrors *prometheus.CounterVec
}

func newStatusMetrics(reg prometheus.Registerer) *statusMetrics {
	m := &statusMetrics{
		seenFlushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_agent_last_seen_flushes_total",
			Help: "Statements writing the agents' last-seen times, by outcome (ok, error)."}, []string{"outcome"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_agent_status_changes_total",
			Help: "Agent status changes this replica announced, by new status."}, []string{"status"}),
		eventErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_agent_status_event_errors_total",
			Help: "Agent status events that could not be published or recorded, by sink (stream, audit)."}, []string{"sink"}),
	}
	if reg != nil {
		reg.MustRegister(m.seenFlushes, m.changes, m.eventErrors)
	}
	return m
}
