package report

import (
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	sent   *prometheus.CounterVec
	failed *prometheus.CounterVec
	paused prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_agent_reports_sent_total",
			Help: "State and system-metrics reports published to the cloud, by report."}, []string{"report"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_agent_reports_failed_total",
			Help: "Reports that could not be built or published when due, by report; they are not retried."}, []string{"report"}),
		paused: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_agent_reports_paused_total",
			Help: "Times the reports paused because the platform connection went down."}),
	}
	for _, r := range []string{control.ReportState, control.ReportMetrics} {
		m.sent.WithLabelValues(r)
		m.failed.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.sent, m.failed, m.paused)
	}
	return m
}
