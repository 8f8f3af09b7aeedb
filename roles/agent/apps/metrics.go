package apps

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	reconciles *prometheus.CounterVec
}

// Outcomes of a reconcile pass.
const (
	outcomeOK    = "ok"
	outcomeError = "error"
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edgeplat_agent_app_reconciles_total",
		Help: "Reconcile passes of the agent's apps against the container runtime, by outcome (ok, or error when a service failed and waits to be retried).",
	}, []string{"outcome"})}
	m.reconciles.WithLabelValues(outcomeOK)
	m.reconciles.WithLabelValues(outcomeError)
	if reg != nil {
		reg.MustRegister(m.reconciles)
	}
	return m
}
