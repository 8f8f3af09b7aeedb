package brokermon

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// Names of the broker figures, whatever their source: Mosquitto's $SYS
// topics (sysNames) or an in-process broker's counters (Stats).
const (
	// Counters, cumulative since the broker started; rates come from them.
	MessagesReceived = "messages_received" // MQTT packets of every type
	MessagesSent     = "messages_sent"
	PublishReceived  = "publish_received" // PUBLISH packets
	PublishSent      = "publish_sent"
	PublishDropped   = "publish_dropped"
	BytesReceived    = "bytes_received"
	BytesSent        = "bytes_sent"
	// Gauges.
	ClientsConnected    = "clients_connected"
	ClientsDisconnected = "clients_disconnected"
	ClientsTotal        = "clients_total"
	ClientsMaximum      = "clients_maximum"
	ClientsExpired      = "clients_expired"
	Subscriptions       = "subscriptions"
	Retained            = "retained"
	Inflight            = "inflight"
	StoredMessages      = "stored_messages"
	StoredBytes         = "stored_bytes"
	HeapCurrent         = "heap_current"
	HeapMaximum         = "heap_maximum"
	Threads             = "threads"
	UptimeSeconds       = "uptime_seconds"
	// platformMessages is the API's own count of the agent messages it
	// received, kept beside the broker's so one window rates both.
	platformMessages = "platform_messages"
)

// counters are the figures that only grow (until the broker restarts).
var counters = []string{MessagesReceived, MessagesSent, PublishReceived, PublishSent, PublishDropped,
	BytesReceived, BytesSent, platformMessages}

// sysNames maps Mosquitto's $SYS topics to the figures.
var sysNames = map[string]string{
	"$SYS/broker/messages/received":         MessagesReceived,
	"$SYS/broker/messages/sent":             MessagesSent,
	"$SYS/broker/publish/messages/received": PublishReceived,
	"$SYS/broker/publish/messages/sent":     PublishSent,
	"$SYS/broker/publish/messages/dropped":  PublishDropped,
	"$SYS/broker/bytes/received":            BytesReceived,
	"$SYS/broker/bytes/sent":                BytesSent,
	"$SYS/broker/clients/connected":         ClientsConnected,
	"$SYS/broker/clients/disconnected":      ClientsDisconnected,
	"$SYS/broker/clients/total":             ClientsTotal,
	"$SYS/broker/clients/maximum":           ClientsMaximum,
	"$SYS/broker/clients/expired":           ClientsExpired,
	"$SYS/broker/subscriptions/count":       Subscriptions,
	"$SYS/broker/retained messages/count":   Retained,
	"$SYS/broker/messages/inflight":         Inflight,
	"$SYS/broker/store/messages/count":      StoredMessages,
	"$SYS/broker/store/messages/bytes":      StoredBytes,
	"$SYS/broker/heap/current":              HeapCurrent,
	"$SYS/broker/heap/maximum":              HeapMaximum,
	"$SYS/broker/uptime":                    UptimeSeconds,
}

const (
	sysVersion = "$SYS/broker/version"
	sysLoad    = "$SYS/broker/load/"
	// maxRaw bounds the $SYS values kept as they came: a broker (or a
	// client allowed to publish under $SYS) cannot grow it.
	maxRaw = 256
	// maxRawValue bounds each kept value.
	maxRawValue = 128
)

// Stats is one reading of a broker's figures.
type Stats struct {
	At      time.Time
	Version string
	// Values by the names above; a figure the broker does not report is
	// absent.
	Values map[string]float64
}

// Source is an in-process broker's own counters (all-in-one's embedded
// broker), read on demand.
type Source interface {
	BrokerStats() Stats
}

// history keeps the recent readings for rates, oldest first.
type history struct {
	snaps []Stats
}

// historyLen bounds the readings kept: at one a second, two minutes.
const historyLen = 120

func (h *history) push(s Stats) {
	if len(h.snaps) == historyLen {
		copy(h.snaps, h.snaps[1:])
		h.snaps = h.snaps[:historyLen-1]
	}
	h.snaps = append(h.snaps, s)
}

// rateWindow is how far back a rate looks: long enough that the broker's
// publishing jitter is a small part of it, short enough to be live. With a
// broker that reports less often, the rate spans two reports.
const rateWindow = 15 * time.Second

// Rates are the per-second rates of the counters over the window ending
// at the newest reading.
type Rates struct {
	From, To time.Time
	PerSec   map[string]float64
}

// rates rates the counters over the newest readings; false when there are
// fewer than two.
func (h *history) rates() (Rates, bool) {
	n := len(h.snaps)
	if n < 2 {
		return Rates{}, false
	}
	last := h.snaps[n-1]
	k := n - 2
	for k > 0 && last.At.Sub(h.snaps[k-1].At) <= rateWindow {
		k--
	}
	first := h.snaps[k]
	dt := last.At.Sub(first.At).Seconds()
	if dt <= 0 {
		return Rates{}, false
	}
	r := Rates{From: first.At, To: last.At, PerSec: map[string]float64{}}
	for _, name := range counters {
		a, okA := first.Values[name]
		b, okB := last.Values[name]
		if !okA || !okB || b < a {
			// Missing, or the broker restarted within the window.
			continue
		}
		r.PerSec[name] = (b - a) / dt
	}
	return r, true
}

// sysCollector reads Mosquitto's $SYS topics. Mosquitto publishes them in
// a burst every sys_interval, each value only when it changed; a reading
// is the values as a burst left them, timed at the burst's last message.
// A burst ends at the first quiet gap: bursts take milliseconds, the
// interval is a second or more.
type sysCollector struct {
	mu      sync.Mutex
	now     func() time.Time
	gap     time.Duration
	cur     map[string]float64
	version string
	raw     map[string]string
	last    time.Time // newest $SYS message
	pending bool      // values changed since the last reading was taken
	hist    history
	// platform is read into each reading as platformMessages.
	platform func() int64
}

func newSysCollector(now func() time.Time, platform func() int64) *sysCollector {
	return &sysCollector{now: now, gap: 250 * time.Millisecond, cur: map[string]float64{}, raw: map[string]string{},
		platform: platform}
}

// handle takes one $SYS message.
func (c *sysCollector) handle(topic string, payload []byte) {
	if !strings.HasPrefix(topic, "$SYS/") {
		return
	}
	now := c.now()
	value := strings.TrimSpace(string(payload))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settleLocked(now)
	if _, ok := c.raw[topic]; ok || len(c.raw) < maxRaw {
		c.raw[topic] = truncate(value, maxRawValue)
	}
	switch name, ok := sysNames[topic]; {
	case topic == sysVersion:
		c.version = truncate(value, maxRawValue)
	case ok:
		// "12345 seconds" for the uptime, a bare number otherwise.
		f, _, _ := strings.Cut(value, " ")
		if v, err := strconv.ParseFloat(f, 64); err == nil {
			c.cur[name] = v
		}
	}
	c.last, c.pending = now, true
}

// settleLocked takes the reading of a burst that ended (a quiet gap
// before now).
func (c *sysCollector) settleLocked(now time.Time) {
	if !c.pending || now.Sub(c.last) <= c.gap {
		return
	}
	vals := make(map[string]float64, len(c.cur)+1)
	for k, v := range c.cur {
		vals[k] = v
	}
	vals[platformMessages] = float64(c.platform())
	c.hist.push(Stats{At: c.last, Version: c.version, Values: vals})
	c.pending = false
}

// sysView is what the collector knows at one moment.
type sysView struct {
	latest Stats
	seen   bool
	rates  Rates
	rated  bool
	raw    map[string]string
	// interval between the two newest readings, 0 when unknown.
	interval time.Duration
}

func (c *sysCollector) view() sysView {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.settleLocked(c.now())
	return viewOf(&c.hist, c.raw)
}

func viewOf(h *history, raw map[string]string) sysView {
	var v sysView
	if n := len(h.snaps); n > 0 {
		v.latest, v.seen = h.snaps[n-1], true
		if n > 1 {
			v.interval = h.snaps[n-1].At.Sub(h.snaps[n-2].At)
		}
	}
	v.rates, v.rated = h.rates()
	if raw != nil {
		v.raw = make(map[string]string, len(raw))
		for k, s := range raw {
			v.raw[k] = s
		}
	}
	return v
}

// poller reads a Source every second into its history.
type poller struct {
	mu       sync.Mutex
	src      Source
	hist     history
	platform func() int64
}

func (p *poller) poll(now time.Time) {
	s := p.src.BrokerStats()
	if s.Values == nil {
		return // not started yet
	}
	vals := make(map[string]float64, len(s.Values)+1)
	for k, v := range s.Values {
		vals[k] = v
	}
	vals[platformMessages] = float64(p.platform())
	if s.At.IsZero() {
		s.At = now
	}
	s.Values = vals
	p.mu.Lock()
	p.hist.push(s)
	p.mu.Unlock()
}

func (p *poller) view() sysView {
	p.mu.Lock()
	defer p.mu.Unlock()
	return viewOf(&p.hist, nil)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
