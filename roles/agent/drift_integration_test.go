package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/drift"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
)

// driftEvents is GET /v1/drift/events's answer.
type driftEvents struct {
	Events []drift.Event `json:"events"`
	Total  int           `json:"total"`
}

// TestDriftOverMQTTIntegration: an MQTT endpoint receives JSON frames on
// the real broker; the drift service, on a clock the test moves 10 s per
// frame, finds after warm-up a field lost for 10 batches (one alert, none
// more within 30 minutes, another after), and promotes a new field seen
// in 60 % of 50 batches. Options, events and state go over HTTP; every
// event also reaches the cloud on the agent's events topic.
func TestDriftOverMQTTIntegration(t *testing.T) {
	broker := "tcp://" + coretest.MQTTAddr(t)
	r := startAgent(t, t.TempDir(), true, nil)
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var offset atomic.Int64 // seconds after start
	r.agent.p.drift.SetClock(func() time.Time { return start.Add(time.Duration(offset.Load()) * time.Second) })

	for _, bad := range []struct {
		path, body string
		code       int
		names      string
	}{
		{"/v1/protocol-outputs/mqtt/drift", `{"drift_options":{"enabled":true,"windowMs":-1}}`, 400, "drift_options.windowMs: must be"},
		{"/v1/protocol-outputs/mqtt/drift", `{"drift_options":{"maxFieldCount":10001}}`, 400, "drift_options.maxFieldCount: must be"},
		{"/v1/protocol-outputs/mqtt/drift", `{"drift_options":{"enabled":"yes"}}`, 400, "drift_options.enabled: must be"},
		{"/v1/protocol-outputs/mqtt/drift", `{}`, 400, "drift_options"},
		{"/v1/protocol-outputs/mqtt/drift", `{"drift_options":{"window":1}}`, 400, "drift_options.window: is not a drift option"},
		{"/v1/protocol-outputs/mqtt/drift", `{"drift_options":[]}`, 400, "drift_options: must be a JSON object"},
		{"/v1/protocol-outputs/mqtt/drift", `{"drift":{}}`, 400, "drift"},
		{"/v1/protocol-outputs/profinet/drift", `{"drift_options":{"enabled":true}}`, 404, "profinet"},
	} {
		if code, body := r.do("PATCH", bad.path, bad.body, nil); code != bad.code || !strings.Contains(errorOf(t, body), bad.names) {
			t.Errorf("PATCH %s %s = %d %s, want %d naming %s", bad.path, bad.body, code, body, bad.code, bad.names)
		}
	}
	code, body := r.do("PATCH", "/v1/protocol-outputs/mqtt/drift", `{"drift_options":{"enabled":true}}`, nil)
	if want := `{"protocol":"mqtt","payload_format":"custom","drift_options":{"enabled":true,"windowMs":0,"maxFieldCount":500}}`; code != 200 || body != want {
		t.Fatalf("PATCH drift = %d %s, want 200 %s", code, body, want)
	}
	if _, body := r.do("GET", "/v1/protocol-outputs", "", nil); !strings.Contains(body, `"drift_options":{"enabled":true,"windowMs":0,"maxFieldCount":500}`) {
		t.Fatalf("GET /v1/protocol-outputs: %s", body)
	}

	// The cloud: a platform destination on the same broker, and a
	// watcher of the agent's events topic.
	prefix := "edgeplat-test/drift-cloud/" + codec.NewUUID().String()
	var cloudMu sync.Mutex
	var cloud []control.Event
	watch := paho.NewClient(paho.NewClientOptions().AddBroker(broker).SetClientID("drift-watch-" + codec.NewUUID().String()))
	if tok := watch.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("watcher: %v", tok.Error())
	}
	t.Cleanup(func() { watch.Disconnect(100) })
	if tok := watch.Subscribe(control.ReportTopic(prefix, control.ReportEvents), 1, func(_ paho.Client, m paho.Message) {
		e, err := control.DecodeEvent(m.Payload())
		if err != nil {
			t.Errorf("event on the events topic: %v: %s", err, m.Payload())
		}
		cloudMu.Lock()
		cloud = append(cloud, e)
		cloudMu.Unlock()
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("watcher subscribe: %v", tok.Error())
	}
	if code, body := r.do("POST", "/v1/publish/destinations", `{"name":"cloud","type":"platform"}`, nil); code != 201 {
		t.Fatalf("platform destination: %d %s", code, body)
	}
	if err := r.agent.p.pub.SetCredentials(t.Context(), dest.PlatformCredentials{BrokerURL: broker,
		ClientID: "drift-agent-" + codec.NewUUID().String(), TopicPrefix: prefix}, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the platform connection", r.agent.p.pub.PlatformConnected)

	topic := "edgeplat-test/drift/" + codec.NewUUID().String()
	code, body = r.do("POST", "/v1/endpoints", fmt.Sprintf(`{"name":"press","protocol":"mqtt",
		"connection":{"brokerUrl":%q,"topics":[%q],"qos":1}}`, broker, topic), nil)
	if code != 201 {
		t.Fatalf("create endpoint = %d %s", code, body)
	}
	feed := paho.NewClient(paho.NewClientOptions().AddBroker(broker).SetClientID("drift-feed-" + codec.NewUUID().String()))
	if tok := feed.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("feeder: %v", tok.Error())
	}
	t.Cleanup(func() { feed.Disconnect(100) })
	eventually(t, 15*time.Second, "the MQTT endpoint to connect", func() bool {
		_, body := r.do("GET", "/v1/adapters/mqtt/devices/press", "", nil)
		return strings.Contains(body, `"connected":true`)
	})

	batches := func() uint64 {
		var st drift.ServiceState
		_, body := r.do("GET", "/v1/drift/state", "", nil)
		if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.Outputs) != 1 {
			t.Fatalf("drift state %s: %v", body, err)
		}
		return st.Outputs[0].Batches
	}
	sent := uint64(0)
	// send publishes one frame 10 s after the last and waits until it is
	// a batch, so every frame is observed at its own time.
	send := func(frame string) {
		t.Helper()
		sent++
		offset.Add(10)
		if tok := feed.Publish(topic, 1, false, frame+"\n"); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
		eventually(t, 10*time.Second, fmt.Sprintf("batch %d", sent), func() bool { return batches() == sent })
	}
	events := func(query string) driftEvents {
		t.Helper()
		code, body := r.do("GET", "/v1/drift/events"+query, "", nil)
		var ev driftEvents
		if err := json.Unmarshal([]byte(body), &ev); code != 200 || err != nil {
			t.Fatalf("GET /v1/drift/events%s = %d %s", query, code, body)
		}
		return ev
	}
	// stored waits for the service to store what it found.
	stored := func(query string, n int) driftEvents {
		t.Helper()
		var ev driftEvents
		eventually(t, 5*time.Second, fmt.Sprintf("%d events for %s", n, query), func() bool {
			ev = events(query)
			return ev.Total >= n
		})
		return ev
	}

	for range drift.WarmupBatches {
		send(`{"temp":61.5,"state":"RUN","alarms":[]}`)
	}
	for range drift.MissingAfter {
		send(`{"temp":61.5,"alarms":[]}`) // state lost
	}
	ev := stored("?kind=missing_field", 1)
	if e := ev.Events[0]; ev.Total != 1 || e.Field != "state" || e.BatchesAbsent != drift.MissingAfter || e.ExpectedType != drift.TypeString ||
		e.Protocol != "mqtt" || e.At != start.Add(300*time.Second).UnixMilli() {
		t.Fatalf("missing_field events %+v", ev)
	}
	// 50 more batches, 500 s: state still missing, no second alert;
	// pressure in 3 of every 5 is promoted at its 30th of 50.
	for i := range drift.PresenceWindow {
		if i%5 < 3 {
			send(`{"temp":61.5,"alarms":[],"pressure":4.2}`)
		} else {
			send(`{"temp":61.5,"alarms":[]}`)
		}
	}
	if ev := events("?kind=missing_field"); ev.Total != 1 {
		t.Fatalf("a second missing_field within 30 minutes: %+v", ev)
	}
	ev = stored("?field=pressure", 2)
	if ev.Total != 2 || !strings.HasPrefix(ev.Events[0].Detail, drift.DetailPromoted) || !strings.HasPrefix(ev.Events[1].Detail, drift.DetailAppeared) ||
		ev.Events[0].At != start.Add(780*time.Second).UnixMilli() || ev.Events[1].At != start.Add(310*time.Second).UnixMilli() {
		t.Fatalf("pressure events (newest first) %+v, want promoted at batch 78, appeared at 31", ev)
	}
	// 30 minutes after the alert, state is reported again.
	offset.Add(1800)
	send(`{"temp":61.5,"alarms":[]}`)
	if ev := stored("?kind=missing_field", 2); ev.Events[0].BatchesAbsent != 61 {
		t.Fatalf("missing_field after 30 minutes: %+v", ev)
	}

	if ev := events("?limit=1"); len(ev.Events) != 1 || ev.Total != 4 {
		t.Fatalf("limit 1: %+v, want 1 of 4", ev)
	}
	if ev := events("?protocol=modbus"); ev.Total != 0 || ev.Events == nil {
		t.Fatalf("modbus events: %+v", ev)
	}
	if ev := events(fmt.Sprintf("?since=%d", start.Add(780*time.Second).UnixMilli())); ev.Total != 2 {
		t.Fatalf("since batch 78: %+v", ev)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?since=x", "?kind=gone"} {
		name := strings.TrimPrefix(strings.SplitN(q, "=", 2)[0], "?")
		if code, body := r.do("GET", "/v1/drift/events"+q, "", nil); code != 400 || !strings.Contains(errorOf(t, body), name) {
			t.Errorf("GET /v1/drift/events%s = %d %s, want 400 naming %s", q, code, body, name)
		}
	}
	var st drift.ServiceState
	_, body = r.do("GET", "/v1/drift/state", "", nil)
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	expected := map[string]bool{}
	for _, f := range st.Outputs[0].Fields {
		expected[f.Field] = f.Expected
	}
	if want := map[string]bool{"alarms": true, "pressure": true, "state": true, "temp": true}; fmt.Sprint(expected) != fmt.Sprint(want) {
		t.Fatalf("fields expected %v, want %v (%s)", expected, want, body)
	}
	// Every stored event reached the cloud as a drift event.
	all := events("")
	eventually(t, 10*time.Second, "4 drift events on the events topic", func() bool {
		cloudMu.Lock()
		defer cloudMu.Unlock()
		return len(cloud) >= 4
	})
	cloudMu.Lock()
	for i, e := range cloud {
		var data drift.Event
		if err := json.Unmarshal(e.Data, &data); err != nil || e.Kind != control.EventDrift || e.ID != data.ID || e.Timestamp != data.At ||
			len(cloud) != 4 || data != all.Events[len(cloud)-1-i] {
			t.Errorf("cloud event %d %+v (%s), want the stored %+v", i, e, e.Data, all.Events[len(cloud)-1-i])
		}
	}
	if cloud[0].Severity != control.SeverityWarning || cloud[1].Severity != control.SeverityInfo {
		t.Errorf("severities %s %s, want warning for missing_field, info for new_field", cloud[0].Severity, cloud[1].Severity)
	}
	cloudMu.Unlock()
	if code, body := r.do("DELETE", "/v1/drift/events", "", nil); code != 200 || body != `{"deleted":4}` {
		t.Fatalf("DELETE /v1/drift/events = %d %s", code, body)
	}
	if ev := events(""); ev.Total != 0 {
		t.Fatalf("after DELETE: %+v", ev)
	}
	// null clears the options, and the output is no longer tracked.
	if code, body := r.do("PATCH", "/v1/protocol-outputs/mqtt/drift", `{"drift_options":null}`, nil); code != 200 || !strings.Contains(body, `"drift_options":null`) {
		t.Fatalf("PATCH null = %d %s", code, body)
	}
	if _, body := r.do("GET", "/v1/drift/state", "", nil); !strings.Contains(body, `"outputs":[]`) {
		t.Fatalf("state after clearing: %s", body)
	}
}
