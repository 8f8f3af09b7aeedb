package api

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/prometheus/client_golang/prometheus"
)

// brokerDroppedTopic is Mosquitto's count of messages it dropped since it
// started because a client's inflight window and queue were full
// (max_inflight_messages, max_queued_messages, 1000 by default). Those
// messages were acknowledged to their publishers, so the agents never
// send them again: a subscriber that falls behind loses telemetry
// silently unless somebody reads this counter. Mosquitto publishes it every
// sys_interval (10 s by default).
const brokerDroppedTopic = "$SYS/broker/publish/messages/dropped"

// dropWatch warns when the broker's dropped-message counter grows.
type dropWatch struct {
	log     *slog.Logger
	dropped prometheus.Counter

	mu   sync.Mutex
	last int64
	seen bool
}

func newDropWatch(log *slog.Logger, reg prometheus.Registerer) *dropWatch {
	w := &dropWatch{log: log, dropped: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "edgeplat_api_broker_messages_dropped_total",
		Help: "Messages the MQTT broker reported dropping (Mosquitto's $SYS/broker/publish/messages/dropped) while serve-api watched: acknowledged to publishers, never delivered; raise max_queued_messages and max_inflight_messages (docs/benchmarks.md).",
	})}
	reg.MustRegister(w.dropped)
	return w
}

// subscribe registers the watch on client as an optional subscription:
// brokers other than Mosquitto, or an ACL, may not offer $SYS.
func (w *dropWatch) subscribe(client *mqttx.Client) error {
	return client.SubscribeOptional(brokerDroppedTopic, 0, w.handle)
}

func (w *dropWatch) handle(_ context.Context, msg mqttx.Message) error {
	n, err := strconv.ParseInt(strings.TrimSpace(string(msg.Payload)), 10, 64)
	if err != nil || n < 0 {
		w.log.Debug("unreadable broker drop counter", "topic", msg.Topic, "payload", string(msg.Payload))
		return nil
	}
	w.observe(n)
	return nil
}

// observe takes one reading of the counter. The first reading only sets
// the baseline (those drops happened before we watched, and may not be
// ours), but is reported when it is not zero; a counter that went down
// means the broker restarted, and counts from zero.
func (w *dropWatch) observe(n int64) {
	w.mu.Lock()
	last, seen := w.last, w.seen
	w.last, w.seen = n, true
	w.mu.Unlock()
	if !seen {
		if n > 0 {
			w.log.Warn("the MQTT broker has dropped messages since it started; if it is Mosquitto, raise max_queued_messages and max_inflight_messages (docs/benchmarks.md)", "dropped", n)
		}
		return
	}
	delta := n - last
	if n < last {
		delta = n // restarted: counting from zero again
	}
	if delta > 0 {
		w.dropped.Add(float64(delta))
		w.log.Warn("the MQTT broker dropped messages it had acknowledged to their publishers: telemetry lost; raise max_queued_messages and max_inflight_messages (docs/benchmarks.md)", "dropped", delta, "broker_total", n)
	}
}
