package runner

import "github.com/prometheus/client_golang/prometheus"

// metrics are labelled by protocol only: endpoint names are operator
// input and unbounded.
type metrics struct {
	polls      *prometheus.CounterVec
	pollErrors *prometheus.CounterVec
	readings   *prometheus.CounterVec
	reconnects *prometheus.CounterVec
	pollTime   *prometheus.HistogramVec
	connected  *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeplat_agent_polls_total", Help: "Polls of protocol endpoints.",
		}, []string{"protocol"}),
		pollErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeplat_agent_poll_errors_total", Help: "Polls that lost the connection.",
		}, []string{"protocol"}),
		readings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeplat_agent_readings_total", Help: "Readings produced, by quality.",
		}, []string{"protocol", "quality"}),
		reconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeplat_agent_connect_attempts_total", Help: "Connection attempts of protocol endpoints, by result.",
		}, []string{"protocol", "result"}),
		pollTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "edgeplat_agent_poll_duration_seconds", Help: "Time one poll of an endpoint took.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"protocol"}),
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "edgeplat_agent_endpoints_connected", Help: "Endpoints currently connected.",
		}, []string{"protocol"}),
	}
	if reg != nil {
		reg.MustRegister(m.polls, m.pollErrors, m.readings, m.reconnects, m.pollTime, m.connected)
	}
	return m
}
