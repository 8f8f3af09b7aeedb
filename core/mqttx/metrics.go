package mqttx

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// clientMetrics are the edgeplat_mqtt_* series. Every series carries the
// client's Name as the "client" label (a process has one or two clients),
// and the state gauge a "state" label with the five states; nothing else is
// a label.
type clientMetrics struct {
	state         *prometheus.GaugeVec
	reconnects    prometheus.Counter
	failures      prometheus.Gauge
	publishes     prometheus.Counter
	publishFailed prometheus.Counter
	queueLength   prometheus.Gauge
	queueDropped  prometheus.Counter
	received      prometheus.Counter
	handlerErrors prometheus.Counter
	unrouted      prometheus.Counter
	forcedReconn  prometheus.Counter
	behind        prometheus.Counter
	stateByLabel  map[State]prometheus.Gauge
}

// newMetrics builds the client's metrics and registers them with reg; a nil
// reg keeps them unregistered. Registering a second client under the same
// name fails.
func newMetrics(reg prometheus.Registerer, client string) (*clientMetrics, error) {
	labels := prometheus.Labels{"client": client}
	m := &clientMetrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "edgeplat_mqtt_client_state", ConstLabels: labels,
			Help: "1 for the MQTT client's current state (stopped, connecting, connected, reconnecting, fatal), 0 for the others."},
			[]string{"state"}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_mqtt_reconnect_attempts_total", ConstLabels: labels,
			Help: "Reconnect attempts made (the first connection attempt after start is not one)."}),
		failures: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_mqtt_consecutive_failures", ConstLabels: labels,
			Help: "Failed reconnect attempts in the current outage; fatal when it reaches the maximum."}),
		publishes: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_mqtt_publishes_total", ConstLabels: labels,
			Help: "Messages published and acknowledged by the broker (QoS 0: written)."}),
		publishFailed: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_mqtt_publish_failures_total", ConstLabels: labels,
			Help: "Publish attempts that failed; the message went back to the front of the queue."}),
		queueLength: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_mqtt_queue_length", ConstLabels: labels,
			Help: "Messages in the pending publish queue, not yet sent."}),
		queueDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_mqtt_queue_dropped_total", ConstLabels: labels,
			Help: "Messages dropped from the pending publish queue, oldest first, because it was full."}),
		received: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_mqtt_messages_received_total", ConstLabels: labels,
			Help: "Messages received from the broker, redeliveries included."}),
		handlerErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_mqtt_handler_errors_total", ConstLabels: labels,
			Help: "Received messages whose handler failed; they were not acknowledged."}),
		unrouted: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_mqtt_messages_unrouted_total", ConstLabels: labels,
			Help: "Received messages no subscription matched (left over in a persistent session); acknowledged and dropped."}),
		forcedReconn: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_mqtt_redelivery_reconnects_total", ConstLabels: labels,
			Help: "Reconnects made on purpose so the broker redelivers unacknowledged messages."}),
		behind: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_mqtt_handler_backpressure_seconds_total", ConstLabels: labels,
			Help: "Seconds the client stopped reading from the broker because a handler worker's buffer was full; the broker queues for the client meanwhile and drops past its limit (Mosquitto: max_queued_messages)."}),
	}
	m.stateByLabel = make(map[State]prometheus.Gauge, len(States()))
	for _, s := range States() {
		m.stateByLabel[s] = m.state.WithLabelValues(s.String())
	}
	m.setState(StateStopped)
	if reg == nil {
		return m, nil
	}
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			m.unregister(reg)
			return nil, fmt.Errorf("register mqtt metrics for client %q: %w", client, err)
		}
	}
	return m, nil
}

func (m *clientMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.state, m.reconnects, m.failures, m.publishes, m.publishFailed,
		m.queueLength, m.queueDropped, m.received, m.handlerErrors, m.unrouted, m.forcedReconn, m.behind}
}

func (m *clientMetrics) unregister(reg prometheus.Registerer) {
	for _, c := range m.collectors() {
		reg.Unregister(c)
	}
}

func (m *clientMetrics) setState(s State) {
	for st, g := range m.stateByLabel {
		if st == s {
			g.Set(1)
		} else {
			g.Set(0)
		}
	}
}
