package discovery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Caps and defaults of an MQTT scan (docs/discovery.md, section MQTT).
const (
	MQTTDefaultDurationMS = 5000
	MQTTMaxDurationMS     = 60000
	mqttMinDurationMS     = 100
	MQTTMaxTopics         = 500
	mqttMaxFilters        = 16
	mqttConnectTimeout    = 5 * time.Second
	mqttProtocol          = "mqtt"
)

// MQTTScanner finds the topics a broker carries: it subscribes to "#"
// (or the filters given) for a while and lists each topic with the shape
// of a sampled payload.
type MQTTScanner struct{}

// Protocol implements Scanner.
func (MQTTScanner) Protocol() string { return mqttProtocol }

// MQTTOptions are the options of an MQTT scan.
type MQTTOptions struct {
	BrokerURL  string   `json:"brokerUrl"`
	Username   string   `json:"username"`
	Password   string   `json:"password"`
	Topics     []string `json:"topics"`
	DurationMS int      `json:"durationMs"`
	MaxTopics  int      `json:"maxTopics"`
}

type mqttPlan struct {
	o        MQTTOptions
	duration time.Duration
}

// Plan implements Scanner.
func (MQTTScanner) Plan(raw json.RawMessage, known []json.RawMessage) (Plan, error) {
	var o MQTTOptions
	if err := decodeOptions(raw, &o); err != nil {
		return nil, err
	}
	var errs []error
	fail := func(field, format string, args ...any) { errs = append(errs, adapters.Fieldf(field, format, args...)) }
	if o.BrokerURL == "" {
		for _, c := range known {
			if k, ok := mqttConn(c); ok {
				o.BrokerURL, o.Username, o.Password = k.BrokerURL, k.Username, k.Password
				break
			}
		}
		if o.BrokerURL == "" {
			fail("brokerUrl", "is required: no MQTT endpoint is configured to scan the broker of")
		}
	}
	if o.BrokerURL != "" {
		if u, err := url.Parse(o.BrokerURL); err != nil || u.Host == "" || !slices.Contains([]string{"tcp", "mqtt", "ssl", "tls", "mqtts", "ws", "wss"}, u.Scheme) {
			fail("brokerUrl", "must be a URL such as tcp://host:1883, got %q", o.BrokerURL)
		}
	}
	o.DurationMS = cmp.Or(o.DurationMS, MQTTDefaultDurationMS)
	if o.DurationMS < mqttMinDurationMS || o.DurationMS > MQTTMaxDurationMS {
		fail("durationMs", "must be %d..%d, got %d", mqttMinDurationMS, MQTTMaxDurationMS, o.DurationMS)
	}
	o.MaxTopics = cmp.Or(o.MaxTopics, MQTTMaxTopics)
	if o.MaxTopics < 1 || o.MaxTopics > MQTTMaxTopics {
		fail("maxTopics", "must be 1..%d, got %d", MQTTMaxTopics, o.MaxTopics)
	}
	if len(o.Topics) == 0 {
		o.Topics = []string{"#"}
	}
	if len(o.Topics) > mqttMaxFilters {
		fail("topics", "at most %d filters, got %d", mqttMaxFilters, len(o.Topics))
	}
	for i, f := range o.Topics {
		if !validFilter(f) {
			fail(fmt.Sprintf("topics[%d]", i), "is not a valid MQTT topic filter: %q", f)
		}
	}
	return &mqttPlan{o: o, duration: time.Duration(o.DurationMS) * time.Millisecond}, errors.Join(errs...)
}

// validFilter: non-empty, "#" last and alone in its level, "+" alone.
func validFilter(f string) bool {
	if f == "" || strings.ContainsRune(f, 0) {
		return false
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		if (strings.Contains(l, "#") && (l != "#" || i != len(levels)-1)) || (strings.Contains(l, "+") && l != "+") {
			return false
		}
	}
	return true
}

type mqttConnection struct {
	BrokerURL string   `json:"brokerUrl"`
	Username  string   `json:"username"`
	Password  string   `json:"password"`
	Topics    []string `json:"topics"`
}

func mqttConn(raw json.RawMessage) (mqttConnection, bool) {
	var c mqttConnection
	if json.Unmarshal(raw, &c) != nil || c.BrokerURL == "" {
		return c, false
	}
	return c, true
}

// brokerKey is a broker URL with what does not matter removed.
func brokerKey(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return s
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

func mqttIdentity(broker, topic string) string { return "mqtt:" + brokerKey(broker) + "|" + topic }

// Covers implements Scanner: the same broker, and a topic filter of the
// endpoint matches the device's topic.
func (MQTTScanner) Covers(conn json.RawMessage, d Device) bool {
	c, ok := mqttConn(conn)
	if !ok {
		return false
	}
	for _, f := range c.Topics {
		topic, _ := d.Details["topic"].(string)
		if mqttIdentity(c.BrokerURL, topic) == d.Identity && mqttx.MatchTopic(f, topic) {
			return true
		}
	}
	return false
}

// topicSample is what a scan kept of one topic.
type topicSample struct {
	messages int
	retained bool
	shape    Shape
}

// listen subscribes to filters for the plan's duration (or until ctx
// ends) and samples the first payload of each topic, keeping at most
// maxTopics topics; further topics are counted only.
func (p *mqttPlan) listen(ctx context.Context, filters []string, maxTopics int) (map[string]*topicSample, int, error) {
	opts := paho.NewClientOptions().AddBroker(p.o.BrokerURL).
		SetClientID("edgeplat-discovery-" + codec.NewUUID().String()[:8]).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectRetry(false).
		SetConnectTimeout(mqttConnectTimeout).SetOrderMatters(false)
	if p.o.Username != "" {
		opts.SetUsername(p.o.Username).SetPassword(p.o.Password)
	}
	var mu sync.Mutex
	topics := map[string]*topicSample{}
	dropped := 0
	opts.SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
		mu.Lock()
		defer mu.Unlock()
		t := topics[m.Topic()]
		if t == nil {
			if len(topics) >= maxTopics {
				dropped++
				return
			}
			t = &topicSample{retained: m.Retained(), shape: SampleShape(m.Payload())}
			topics[m.Topic()] = t
		}
		t.messages++
	})
	c := paho.NewClient(opts)
	tok := c.Connect()
	if !waitToken(ctx, tok, mqttConnectTimeout) {
		return nil, 0, cmp.Or(ctx.Err(), fmt.Errorf("connect to %s: timed out", p.o.BrokerURL))
	}
	if err := tok.Error(); err != nil {
		return nil, 0, fmt.Errorf("connect to %s: %w", p.o.BrokerURL, err)
	}
	defer c.Disconnect(100)
	subs := map[string]byte{}
	for _, f := range filters {
		subs[f] = 0
	}
	st := c.SubscribeMultiple(subs, nil)
	if !waitToken(ctx, st, mqttConnectTimeout) {
		return nil, 0, cmp.Or(ctx.Err(), fmt.Errorf("subscribe on %s: timed out", p.o.BrokerURL))
	}
	if err := st.Error(); err != nil {
		return nil, 0, fmt.Errorf("subscribe on %s: %w", p.o.BrokerURL, err)
	}
	t := time.NewTimer(p.duration)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	c.Disconnect(100)
	mu.Lock()
	defer mu.Unlock()
	out := make(map[string]*topicSample, len(topics))
	for k, v := range topics {
		s := *v
		out[k] = &s
	}
	return out, dropped, nil
}

func waitToken(ctx context.Context, tok paho.Token, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-tok.Done():
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// Scan implements Plan: one device per topic seen.
func (p *mqttPlan) Scan(ctx context.Context) ([]Device, error) {
	topics, dropped, err := p.listen(ctx, p.o.Topics, p.o.MaxTopics)
	if err != nil {
		return nil, err
	}
	out := make([]Device, 0, len(topics))
	for topic, s := range topics {
		conn, _ := json.Marshal(map[string]any{"brokerUrl": p.o.BrokerURL, "topics": []string{topic}})
		details := map[string]any{"topic": topic, "messages": s.messages, "retained": s.retained, "shape": s.shape}
		out = append(out, Device{Protocol: mqttProtocol, Name: "mqtt-" + strings.ReplaceAll(topic, "/", "."),
			Connection: conn, Identity: mqttIdentity(p.o.BrokerURL, topic), Details: details})
	}
	slices.SortFunc(out, func(a, b Device) int { return cmp.Compare(a.Identity, b.Identity) })
	if dropped > 0 {
		out[len(out)-1].Details["topicsNotListed"] = dropped
	}
	return out, ctx.Err()
}

// Validate implements Plan: one more subscription, to the devices'
// topics only; a topic that carries a message within the duration (a
// retained one at once) is validated.
func (p *mqttPlan) Validate(ctx context.Context, devs []Device) {
	var filters []string
	for _, d := range devs {
		if t, ok := d.Details["topic"].(string); ok {
			filters = append(filters, t)
		}
	}
	if len(filters) == 0 {
		return
	}
	topics, _, err := p.listen(ctx, filters, len(filters))
	if err != nil {
		return
	}
	for i := range devs {
		t, _ := devs[i].Details["topic"].(string)
		devs[i].Validated = topics[t] != nil
	}
}

var (
	_ Scanner = MQTTScanner{}
	_ Plan    = (*mqttPlan)(nil)
)
