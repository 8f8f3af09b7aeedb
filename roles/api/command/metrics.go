package command

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	published  prometheus.Counter
	handedOver prometheus.Counter
	dropped    prometheus.Counter
	failed     prometheus.Counter
	pending    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeplat_api_commands_published_total",
			Help: "Commands to agents the broker acknowledged.",
		}),
		handedOver: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeplat_api_commands_requeued_total",
			Help: "Commands whose connection dropped while they were sent; the MQTT client sends them again after the reconnect.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeplat_api_commands_dropped_total",
			Help: "Commands dropped, oldest first, from the full pending queue while the broker was away.",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeplat_api_commands_failed_total",
			Help: "Commands the MQTT client refused to send.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgeplat_api_commands_pending",
			Help: "Commands waiting in the pending queue for the broker.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.published, m.handedOver, m.dropped, m.failed, m.pending} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register command metrics: %w", err)
		}
	}
	return m, nil
}
