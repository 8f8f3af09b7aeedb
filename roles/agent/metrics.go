package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/roles/agent/publish"
)

// syncMetrics count the target-state pulls from the cloud.
type syncMetrics struct {
	attempts    prometheus.Counter
	failures    prometheus.Counter
	lastSuccess prometheus.Gauge
}

// newMetrics registers the agent's publishing and cloud sync metrics on
// reg; the endpoints' own are the runner's.
func newMetrics(reg prometheus.Registerer, p *publish.Router) *syncMetrics {
	m := &syncMetrics{
		attempts: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_agent_cloud_sync_attempts_total",
			Help: "Target-state pulls from the cloud."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_agent_cloud_sync_failures_total",
			Help: "Target-state pulls that failed (cloud unreachable or refusing)."}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_agent_cloud_sync_last_success_timestamp_seconds",
			Help: "Unix time of the last target-state pull the cloud answered; 0 before the first."}),
	}
	if reg != nil {
		reg.MustRegister(m.attempts, m.failures, m.lastSuccess, p.Collector())
	}
	return m
}
