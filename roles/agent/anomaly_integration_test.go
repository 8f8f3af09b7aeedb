package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
)

// scoredReading is one published custom reading of a metric.
type scoredReading struct {
	value     float64
	score     *float64
	threshold float64
}

// scoreLog keeps, in arrival order, the custom readings of one metric
// published on a broker.
type scoreLog struct {
	mu     sync.Mutex
	metric string
	rs     []scoredReading
}

func logScores(t *testing.T, brokerURL, filter, metric string) *scoreLog {
	t.Helper()
	l := &scoreLog{metric: metric}
	opts := paho.NewClientOptions().AddBroker(brokerURL).SetClientID("anomaly-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)).
		SetCleanSession(true).SetOrderMatters(true)
	c := paho.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber connect: %v", tok.Error())
	}
	if tok := c.Subscribe(filter, 1, func(_ paho.Client, m paho.Message) { l.add(m.Payload()) }); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return l
}

func (l *scoreLog) add(payload []byte) {
	dec, err := codec.Decode(payload, codec.Limits{})
	if err != nil {
		return
	}
	doc, _ := dec.Value.(map[string]any)
	msgs, _ := doc["messages"].([]any)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		rs, _ := m.(map[string]any)["readings"].([]any)
		for _, r := range rs {
			rd := r.(map[string]any)
			if rd["metric"] != l.metric {
				continue
			}
			v, _ := number(rd["value"])
			sr := scoredReading{value: v}
			if s, ok := number(rd["anomaly_score"]); ok {
				sr.score = &s
				sr.threshold, _ = number(rd["anomaly_threshold"])
			}
			l.rs = append(l.rs, sr)
		}
	}
}

// number reads a decoded JSON number: codec gives an integral value back
// as int64.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	}
	return 0, false
}

func (l *scoreLog) all() []scoredReading {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]scoredReading(nil), l.rs...)
}

func (l *scoreLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rs = nil
}

type baselineList struct {
	Baselines []struct {
		Metric      string `json:"metric"`
		SampleCount int64  `json:"sample_count"`
	} `json:"baselines"`
	Total int `json:"total"`
}

func (r *running) sampleCount(metric string) int64 {
	r.t.Helper()
	code, body := r.do("GET", "/v1/anomaly/baselines?metric="+metric, "", nil)
	var bl baselineList
	if err := json.Unmarshal([]byte(body), &bl); code != 200 || err != nil {
		r.t.Fatalf("GET /v1/anomaly/baselines = %d %s", code, body)
	}
	var n int64
	for _, b := range bl.Baselines {
		n += b.SampleCount
	}
	return n
}

// TestAnomalyModbusIntegration: an agent polls a constant register of a
// real Modbus server and publishes to Mosquitto in the custom format.
// After the warm-up the payloads carry anomaly_score and no alert is
// raised; a step written through the agent is flagged, critical, within
// 2 polls. Baselines survive a restart: the new run shows the saved
// sample_count and enriches its first payload, without a new warm-up.
func TestAnomalyModbusIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts Mosquitto and a Modbus server")
	}
	broker := coretest.PrivateMosquitto(t)
	mbPort := coretest.FreePort(t)
	startPymodbus(t, mbPort)
	dir := t.TempDir()
	r := startAgent(t, dir, true, nil)
	got := logScores(t, broker.URL(), "anom/#", "r0")
	create := func(path, body string) map[string]any {
		t.Helper()
		code, out := r.do("POST", path, body, nil)
		if code != 201 {
			t.Fatalf("POST %s: %d %s", path, code, out)
		}
		return decode(t, out)
	}
	d := create("/v1/publish/destinations", fmt.Sprintf(`{"name":"live","type":"mqtt","config_json":{"url":%q}}`, broker.URL()))
	create("/v1/publish/subscriptions", fmt.Sprintf(`{"publish_destination_id":%v,"route_json":{"topic":"anom/{mqttTopic}"}}`, d["id"]))
	create("/v1/endpoints", fmt.Sprintf(`{"name":"press","protocol":"modbus","poll_interval":100,
		"connection":{"host":"127.0.0.1","port":%d,"unitId":1},
		"data_points":[{"name":"r0","register":"holding:0"},{"name":"r1","register":"holding:1"}]}`, mbPort))

	// Warm-up: the first 20 polls are published without enrichment, the
	// ones after it with.
	eventually(t, 30*time.Second, "an enriched reading after the warm-up", func() bool {
		rs := got.all()
		return len(rs) > 0 && rs[len(rs)-1].score != nil
	})
	rs := got.all()
	for i, x := range rs {
		if i < 19 && x.score != nil {
			t.Fatalf("reading %d of the warm-up carries anomaly_score %v", i, *x.score)
		}
	}
	// Steady: 15 more polls, no alert.
	n := len(rs)
	eventually(t, 30*time.Second, "15 polls after the warm-up", func() bool { return len(got.all()) >= n+15 })
	if _, body := r.do("GET", "/v1/anomaly/alerts", "", nil); body != `{"alerts":[],"total":0}` {
		t.Fatalf("a constant register alerted: %s", body)
	}
	for _, x := range got.all()[n:] {
		if x.score == nil || *x.score > x.threshold {
			t.Fatalf("steady reading scored %+v", x)
		}
	}

	// A step: the first or second poll of the new value is flagged and
	// the alert is critical.
	if code, body := r.do("POST", "/v1/adapters/modbus/devices/press/write", `{"register":"r0","value":1500}`, nil); code != 200 {
		t.Fatalf("write: %d %s", code, body)
	}
	eventually(t, 30*time.Second, "2 polls of the new value", func() bool {
		c := 0
		for _, x := range got.all() {
			if x.value == 1500 {
				c++
			}
		}
		return c >= 2
	})
	var step []scoredReading
	for _, x := range got.all() {
		if x.value == 1500 {
			step = append(step, x)
		}
	}
	flagged := func(x scoredReading) bool { return x.score != nil && *x.score > x.threshold }
	if !flagged(step[0]) && !flagged(step[1]) {
		t.Fatalf("the step was not flagged within 2 polls: %+v %+v", step[0], step[1])
	}
	code, body := r.do("GET", "/v1/anomaly/alerts?metric=r0&severity=critical", "", nil)
	var al struct {
		Alerts []struct {
			Value    float64 `json:"value"`
			Severity string  `json:"severity"`
		} `json:"alerts"`
	}
	if err := json.Unmarshal([]byte(body), &al); code != 200 || err != nil || len(al.Alerts) == 0 || al.Alerts[len(al.Alerts)-1].Value != 1500 {
		t.Fatalf("critical alerts of r0 = %d %s", code, body)
	}

	// Back to the old level, then a restart: what was saved comes back,
	// with its sample count, and the first published reading of the new
	// run is enriched and not flagged. Alerts live in memory only.
	if code, body := r.do("POST", "/v1/adapters/modbus/devices/press/write", `{"register":"r0","value":1000}`, nil); code != 200 {
		t.Fatalf("write: %d %s", code, body)
	}
	n = len(got.all())
	eventually(t, 30*time.Second, "5 polls of the old value", func() bool {
		rs := got.all()
		return len(rs) >= n+5 && rs[len(rs)-1].value == 1000 && rs[len(rs)-5].value == 1000
	})
	if code, body := r.do("POST", "/v1/anomaly/save-baselines", "", nil); code != 200 {
		t.Fatalf("save-baselines = %d %s", code, body)
	}
	saved := r.sampleCount("r0")
	if saved < 35 {
		t.Fatalf("sample_count %d before the restart", saved)
	}
	r.stop()
	got.reset()
	r = startAgent(t, dir, true, nil)
	if after := r.sampleCount("r0"); after < saved {
		t.Fatalf("sample_count after the restart %d, saved %d", after, saved)
	}
	eventually(t, 30*time.Second, "a reading of the new run", func() bool { return len(got.all()) > 0 })
	if first := got.all()[0]; first.score == nil || *first.score > first.threshold {
		t.Fatalf("the first reading after a restart is not enriched, or flagged: %+v", first)
	}
	if _, body := r.do("GET", "/v1/anomaly/alerts", "", nil); body != `{"alerts":[],"total":0}` {
		t.Fatalf("alerts after a restart: %s", body)
	}
}

// TestAnomalyAlertReachesTheCloudIntegration: a provisioned agent sends
// each new alert on its events topic as a critical anomaly_alert event
// whose data is the alert.
func TestAnomalyAlertReachesTheCloudIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts Mosquitto")
	}
	broker := coretest.PrivateMosquitto(t)
	cloudSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case req.Method == "POST" && req.URL.Path == "/api/v1/provision/agent":
			var in map[string]string
			_ = json.NewDecoder(req.Body).Decode(&in)
			fmt.Fprintf(w, `{"agentUuid":%q,"tenantId":"t1","apiKey":"k1","mqtt":{"brokerUrl":%q,"clientId":"anom-%s","topicPrefix":"test/anom/%s"}}`,
				in["agentUuid"], broker.URL(), in["agentUuid"], in["agentUuid"])
		case req.Method == "GET" && strings.HasPrefix(req.URL.Path, "/api/v1/device/"):
			w.Header().Set("ETag", `"v1"`)
			_, _ = w.Write([]byte(`{"version":1,"state":{}}`))
		default:
			http.NotFound(w, req)
		}
	}))
	defer cloudSrv.Close()

	events := make(chan []byte, 16)
	opts := paho.NewClientOptions().AddBroker(broker.URL()).SetClientID("anomaly-events-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	c := paho.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscriber connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	if tok := c.Subscribe("test/anom/+/events", 1, func(_ paho.Client, m paho.Message) {
		select {
		case events <- m.Payload():
		default:
		}
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}

	r := startAgent(t, t.TempDir(), true, func(a *config.Agent) { a.Development = true })
	if code, body := r.do("POST", "/v1/provision", fmt.Sprintf(`{"provisioningApiKey":"pk","apiEndpoint":%q}`, cloudSrv.URL), nil); code != 200 {
		t.Fatalf("provision = %d %s", code, body)
	}
	if code, body := r.do("POST", "/v1/test/anomaly", `{"metric":"probe","value":5,"count":25}`, nil); code != 200 {
		t.Fatalf("inject = %d %s", code, body)
	}
	if code, body := r.do("POST", "/v1/test/anomaly", `{"metric":"probe","value":500}`, nil); code != 200 || !strings.Contains(body, `"severity":"critical"`) {
		t.Fatalf("inject a step = %d %s", code, body)
	}
	select {
	case raw := <-events:
		ev, err := control.DecodeEvent(raw)
		if err != nil {
			t.Fatalf("event %s: %v", raw, err)
		}
		var a struct {
			Metric   string  `json:"metric"`
			Value    float64 `json:"value"`
			Severity string  `json:"severity"`
		}
		if err := json.Unmarshal(ev.Data, &a); err != nil || ev.Kind != control.EventAnomalyAlert || ev.Severity != "critical" ||
			a.Metric != "probe" || a.Value != 500 || a.Severity != "critical" {
			t.Fatalf("event %s (%v)", raw, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no anomaly_alert event on the events topic")
	}
}
