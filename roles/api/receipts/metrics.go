package receipts

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// trackerMetrics never carry tenant or agent ids: the drop reason is the
// only label.
type trackerMetrics struct {
	sent    prometheus.Counter
	ranges  prometheus.Counter
	dropped *prometheus.CounterVec
	pending prometheus.Gauge
}

func newTrackerMetrics() *trackerMetrics {
	m := &trackerMetrics{
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_receipts_sent_total",
			Help: "Delivery receipts handed to the command publisher, at most one per agent per second."}),
		ranges: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_receipt_ranges_sent_total",
			Help: "Sequence ranges in the delivery receipts sent; over receipts sent, the ranges per receipt."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_receipt_sequences_dropped_total",
			Help: "Message sequences left out of receipts because a memory bound was reached (agents, keys or ranges); their agents send them again after the receipt wait."},
			[]string{"reason"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_api_receipt_agents",
			Help: "Agents the receipt tracker holds: with a receipt pending or sent within the last second."}),
	}
	for _, reason := range []string{"agents", "keys", "ranges"} {
		m.dropped.WithLabelValues(reason)
	}
	return m
}

func (m *trackerMetrics) register(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{m.sent, m.ranges, m.dropped, m.pending} {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}
