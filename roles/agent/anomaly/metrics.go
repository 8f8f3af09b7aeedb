package anomaly

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	observed      prometheus.Counter
	alerts        *prometheus.CounterVec
	eventsSent    prometheus.Counter
	eventsFailed  prometheus.Counter
	eventsDropped prometheus.Counter
	saves         prometheus.Counter
}

// newMetrics registers the service's metrics (docs/metrics.md); a nil
// registerer keeps them unregistered (tests).
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		observed: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_agent_anomaly_observations_total",
			Help: "Numeric readings and system metric samples the anomaly detector scored."}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_agent_anomaly_alerts_total",
			Help: "Anomaly alerts raised, by severity."}, []string{"severity"}),
		eventsSent: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_agent_anomaly_events_sent_total",
			Help: "Anomaly alerts handed to a platform destination as critical events."}),
		eventsFailed: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_agent_anomaly_events_failed_total",
			Help: "Anomaly alerts a platform destination refused to queue."}),
		eventsDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_agent_anomaly_events_dropped_total",
			Help: "Anomaly alerts not sent to the cloud because the agent's event queue was full; they stay in the local alert list."}),
		saves: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_agent_anomaly_baseline_saves_total",
			Help: "Saves of the anomaly baselines to the agent's store."}),
	}
	for _, sev := range []string{"critical", "warning", "info"} {
		m.alerts.WithLabelValues(sev)
	}
	if reg != nil {
		reg.MustRegister(m.observed, m.alerts, m.eventsSent, m.eventsFailed, m.eventsDropped, m.saves)
	}
	return m
}
