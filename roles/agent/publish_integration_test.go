package agent

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// inbox is a subscriber on a broker the agent publishes to: it keeps the
// msgIds and formats of what arrives.
type inbox struct {
	mu      sync.Mutex
	ids     map[uint64]int // sequence of the msgId -> times seen
	formats map[string]int // "custom", "tags", ...
	topics  map[string]int
	first   time.Time
	last    time.Time
}

func subscribe(t *testing.T, brokerURL, filter string) *inbox {
	t.Helper()
	in := &inbox{ids: map[uint64]int{}, formats: map[string]int{}, topics: map[string]int{}}
	opts := paho.NewClientOptions().AddBroker(brokerURL).SetClientID("agent-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)).
		SetCleanSession(true).SetOrderMatters(false)
	c := paho.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber connect: %v", tok.Error())
	}
	tok := c.Subscribe(filter, 1, func(_ paho.Client, m paho.Message) { in.add(m.Topic(), m.Payload()) })
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return in
}

func (in *inbox) add(topic string, payload []byte) {
	dec, err := codec.Decode(payload, codec.Limits{})
	doc, _ := dec.Value.(map[string]any)
	in.mu.Lock()
	defer in.mu.Unlock()
	now := time.Now()
	if in.first.IsZero() {
		in.first = now
	}
	in.last = now
	in.topics[topic]++
	switch {
	case err != nil:
		in.formats["undecodable"]++
	case doc["msgId"] != nil:
		in.formats["custom"]++
		if _, seq, err := codec.ParseMsgID(fmt.Sprint(doc["msgId"])); err == nil {
			in.ids[seq]++
		}
	case doc["schema"] != nil:
		in.formats["ml"]++
	case doc["tags"] != nil:
		in.formats["tags"]++
	default:
		in.formats["other"]++
	}
}

func (in *inbox) count(format string) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.formats[format]
}

// gaps returns the sequence numbers missing between the lowest and the
// highest msgId seen, and how many msgIds were seen.
func (in *inbox) gaps() (missing []uint64, seen int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	var lo, hi uint64
	for s := range in.ids {
		if lo == 0 || s < lo {
			lo = s
		}
		hi = max(hi, s)
	}
	for s := lo; s <= hi && lo > 0; s++ {
		if in.ids[s] == 0 {
			missing = append(missing, s)
		}
	}
	return missing, len(in.ids)
}

// blackHole accepts TCP connections and never answers: a destination
// whose host is up and whose broker hangs, the worst kind of dead.
func blackHole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	return "tcp://" + ln.Addr().String()
}

// TestDeadDestinationDoesNotSlowLiveIntegration: an endpoint polled every
// 100 ms feeds two MQTT destinations, a live Mosquitto and a broker that
// accepts connections and never answers. The live one receives every
// batch, without a gap in the msgIds, at the poll rate, while the dead
// one's batches wait in its offline queue. A PATCH of the live
// subscription (format, then disabled) takes effect at once.
func TestDeadDestinationDoesNotSlowLiveIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts Mosquitto and a Modbus server")
	}
	broker := coretest.PrivateMosquitto(t)
	mbPort := coretest.FreePort(t)
	startPymodbus(t, mbPort)
	r := startAgent(t, t.TempDir(), true, nil)
	live := subscribe(t, broker.URL(), "live/#")

	create := func(path, body string) map[string]any {
		t.Helper()
		code, out := r.do("POST", path, body, nil)
		if code != 201 {
			t.Fatalf("POST %s: %d %s", path, code, out)
		}
		return decode(t, out)
	}
	liveDest := create("/v1/publish/destinations", fmt.Sprintf(`{"name":"live","type":"mqtt","config_json":{"url":%q}}`, broker.URL()))
	deadDest := create("/v1/publish/destinations", fmt.Sprintf(`{"name":"dead","type":"mqtt","config_json":{"url":%q}}`, blackHole(t)))
	liveSub := create("/v1/publish/subscriptions", fmt.Sprintf(`{"publish_destination_id":%v,"route_json":{"topic":"live/{mqttTopic}"}}`, liveDest["id"]))
	create("/v1/publish/subscriptions", fmt.Sprintf(`{"publish_destination_id":%v,"compression":"msgpack","route_json":{"topic":"dead/press"}}`, deadDest["id"]))
	create("/v1/endpoints", fmt.Sprintf(`{"name":"press-1","protocol":"modbus","poll_interval":100,"mqtt_topic":"plant/press-1",
		"connection":{"host":"127.0.0.1","port":%d,"unitId":1},
		"data_points":[{"name":"r0","register":"holding:0"},{"name":"r1","register":"holding:1"}]}`, mbPort))

	eventually(t, 15*time.Second, "the first batch at the live destination", func() bool { return live.count("custom") > 0 })
	var dead map[string]any
	eventually(t, 30*time.Second, "the dead destination's queue to hold 100 batches", func() bool {
		_, body := r.do("GET", "/v1/buffer/status", "", nil)
		var st struct {
			Destinations []struct {
				Name    string `json:"name"`
				Publish struct {
					Mode    string `json:"mode"`
					Records int64  `json:"mqttMessageBufferCount"`
				} `json:"publish"`
			} `json:"destinations"`
		}
		if json.Unmarshal([]byte(body), &st) != nil {
			return false
		}
		for _, d := range st.Destinations {
			if d.Name == "dead" && d.Publish.Mode == "buffer-only" && d.Publish.Records >= 100 {
				dead = map[string]any{"mode": d.Publish.Mode, "records": d.Publish.Records}
				return true
			}
		}
		return false
	})
	// Every poll is one batch and one msgId: the live destination has had
	// every batch the endpoint produced so far, apart from those in flight.
	_, body := r.do("GET", "/v1/adapters/modbus/devices/press-1/metrics", "", nil)
	polls := int(decode(t, body)["polls"].(float64))
	eventually(t, 10*time.Second, fmt.Sprintf("the live destination to have the %d batches of %d polls", polls, polls), func() bool {
		_, seen := live.gaps()
		return seen >= polls
	})
	missing, seen := live.gaps()
	if len(missing) > 0 {
		t.Fatalf("the live destination missed %d msgIds between the first and the last it got, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}
	live.mu.Lock()
	rate := float64(seen) / live.last.Sub(live.first).Seconds()
	live.mu.Unlock()
	t.Logf("live destination: %d batches in order without a gap (%.1f/s at 100 ms polls); dead destination meanwhile: %v", seen, rate, dead)

	// PATCH takes effect at once: the next batches are tags, then none.
	if code, body := r.do("PATCH", fmt.Sprintf("/v1/publish/subscriptions/%v", liveSub["id"]), `{"payload_format":"tags"}`, nil); code != 200 {
		t.Fatalf("patch format: %d %s", code, body)
	}
	eventually(t, 5*time.Second, "tags payloads after the PATCH", func() bool { return live.count("tags") >= 3 })
	if code, body := r.do("PATCH", fmt.Sprintf("/v1/publish/subscriptions/%v", liveSub["id"]), `{"enabled":false}`, nil); code != 200 {
		t.Fatalf("patch enabled: %d %s", code, body)
	}
	time.Sleep(300 * time.Millisecond) // a batch already handed over may still arrive
	before := live.count("tags")
	time.Sleep(time.Second)
	if after := live.count("tags"); after != before {
		t.Fatalf("a disabled subscription still publishes: %d tags payloads after disabling, %d a second later", before, after)
	}
	// Deleting the dead destination deletes its offline queue with it.
	if code, body := r.do("DELETE", fmt.Sprintf("/v1/publish/destinations/%v", deadDest["id"]), "", nil); code != 200 {
		t.Fatalf("delete dead destination: %d %s", code, body)
	}
	st, _ := r.agent.p.st.Open()
	q, err := st.OfflineQueue(store.DefaultQueueOptions())
	if err != nil {
		t.Fatal(err)
	}
	if qs, err := q.Stats(t.Context(), int64(deadDest["id"].(float64))); err != nil || qs.Records != 0 || qs.Counters.Enqueued != 0 {
		t.Fatalf("the deleted destination's queue: %+v %v", qs, err)
	}
	if _, body := r.do("GET", "/v1/buffer/status", "", nil); strings.Contains(body, `"name":"dead"`) {
		t.Fatalf("a deleted destination in the buffer status: %s", body)
	}
	live.mu.Lock()
	for topic := range live.topics {
		if !strings.HasPrefix(topic, "live/plant/press-1") {
			t.Errorf("live topic %q: want live/{mqttTopic} expanded", topic)
		}
	}
	live.mu.Unlock()
}

// TestHeartbeatIntegration: an endpoint with a heartbeat topic sends its
// heartbeat to the platform broker in plain JSON at its interval while it
// is connected; during a broker outage heartbeats stop and none of them is
// queued and replayed afterwards.
func TestHeartbeatIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts Mosquitto and a Modbus server")
	}
	broker := coretest.PrivateMosquitto(t)
	mbPort := coretest.FreePort(t)
	startPymodbus(t, mbPort)
	r := startAgent(t, t.TempDir(), true, nil)
	const prefix = "i/AAAAAAAAAAAAAAAAAAAAAA/a/BBBBBBBBBBBBBBBBBBBBBB"
	var mu sync.Mutex
	var beats []map[string]any
	var arrived []time.Time
	opts := paho.NewClientOptions().AddBroker(broker.URL()).SetClientID("hb-watch").SetCleanSession(true).SetAutoReconnect(true).
		SetOnConnectHandler(func(c paho.Client) {
			c.Subscribe(prefix+"/endpoints/hb/#", 1, func(_ paho.Client, m paho.Message) {
				var doc map[string]any
				if err := json.Unmarshal(m.Payload(), &doc); err != nil {
					t.Errorf("heartbeat is not plain JSON: %q", m.Payload())
					return
				}
				mu.Lock()
				beats = append(beats, doc)
				arrived = append(arrived, time.Now())
				mu.Unlock()
			}).Wait()
		})
	c := paho.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("watcher: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })

	if code, body := r.do("POST", "/v1/publish/destinations", `{"name":"cloud","type":"platform"}`, nil); code != 201 {
		t.Fatalf("platform destination: %d %s", code, body)
	}
	// As provisioning would: the platform destination gets credentials.
	if err := r.agent.p.pub.SetCredentials(t.Context(), dest.PlatformCredentials{BrokerURL: broker.URL(), ClientID: "agent-hb-test", TopicPrefix: prefix}, ""); err != nil {
		t.Fatal(err)
	}
	if code, body := r.do("POST", "/v1/endpoints", fmt.Sprintf(`{"name":"press-1","protocol":"modbus","poll_interval":500,
		"heartbeat_topic":"hb/press-1","heartbeat_interval":1,
		"connection":{"host":"127.0.0.1","port":%d,"unitId":1},"data_points":[{"name":"r0","register":"holding:0"}]}`, mbPort), nil); code != 201 {
		t.Fatalf("endpoint: %d %s", code, body)
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(beats) }
	eventually(t, 15*time.Second, "three heartbeats", func() bool { return count() >= 3 })
	mu.Lock()
	hb := beats[len(beats)-1]
	mu.Unlock()
	stats, _ := hb["stats"].(map[string]any)
	if hb["endpoint"] != "press-1" || hb["state"] != "CONNECTED" || stats == nil || stats["messagesReceived"].(float64) < 1 || stats["lastHeartbeatTime"] == nil {
		t.Fatalf("heartbeat %v", hb)
	}

	broker.Stop()
	eventually(t, 10*time.Second, "the platform destination to buffer", func() bool {
		_, body := r.do("GET", "/v1/buffer/status", "", nil)
		return strings.Contains(body, `"transportPublishMode":"buffer-only"`)
	})
	time.Sleep(3 * time.Second) // three heartbeat intervals of outage
	restarted := time.Now()
	before := count()
	broker.Start()
	eventually(t, 30*time.Second, "heartbeats again after the outage", func() bool { return count() >= before+2 })
	mu.Lock()
	defer mu.Unlock()
	// Heartbeats are never queued: whatever arrives after the outage was
	// made after it.
	for i, doc := range beats[before:] {
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(doc["timestamp"]))
		if err != nil || at.Before(restarted) {
			t.Errorf("heartbeat %d after the outage was made at %v (%v), before the broker came back at %s: a queued heartbeat was replayed", i, doc["timestamp"], err, restarted)
		}
	}
}
