package logship

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	shipped prometheus.Counter
	dropped *prometheus.CounterVec
	uploads *prometheus.CounterVec
	opened  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, s *Shipper) *metrics {
	m := &metrics{
		shipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_agent_log_lines_shipped_total",
			Help: "Agent log lines the cloud took."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_agent_log_lines_dropped_total",
			Help: "Agent log lines dropped before the cloud took them: overflow (the buffer was full, oldest first) or refused (the cloud refused their batch)."},
			[]string{"reason"}),
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_agent_log_uploads_total",
			Help: "Agent log batch uploads by outcome: ok, failed (retried) or refused (dropped)."}, []string{"outcome"}),
		opened: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_agent_log_circuit_opened_total",
			Help: "Times the log shipping circuit breaker opened."}),
	}
	for _, r := range []string{"overflow", "refused"} {
		m.dropped.WithLabelValues(r)
	}
	for _, o := range []string{"ok", "failed", "refused"} {
		m.uploads.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.shipped, m.dropped, m.uploads, m.opened,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "edgeplat_agent_log_buffer_lines",
				Help: "Agent log lines waiting for the cloud."}, func() float64 { n, _, _ := s.buf.stats(); return float64(n) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "edgeplat_agent_log_buffer_bytes",
				Help: "Bytes of the agent log lines waiting for the cloud."}, func() float64 { _, b, _ := s.buf.stats(); return float64(b) }))
	}
	return m
}
