package api

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/roles/api/accounts/accountstest"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/brokermon"
)

// TestBrokerMonitorMosquittoIntegration: on a Mosquitto reporting every
// second, /broker/status and /broker/metrics follow a publishing load the
// test generates, through the API's one $SYS subscription.
func TestBrokerMonitorMosquittoIntegration(t *testing.T) {
	broker := coretest.PrivateMosquittoWith(t, "sys_interval 1\n")
	reg := metrics.NewRegistry()
	mo := mqttx.DefaultOptions()
	mo.BrokerURL, mo.ClientID, mo.CleanSession, mo.Registerer, mo.Name = broker.URL(), "api-monitor-"+randomID(t), true, reg, "api-mqtt"
	client, err := mqttx.New(mo)
	if err != nil {
		t.Fatal(err)
	}
	mon, err := brokermon.New(brokermon.Options{Connected: func() bool { return client.State() == mqttx.StateConnected }})
	if err != nil {
		t.Fatal(err)
	}
	if err := subscribeSys(client, newDropWatch(slog.New(slog.DiscardHandler), reg), mon); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lifecycle.Run(ctx, lifecycle.Options{}, client, mon) }()
	defer func() { cancel(); <-done }()
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	brokermon.Register(e.Group("/api/v1"), brokermon.Deps{Monitor: mon, Caller: accountstest.Caller, WriteError: apitest.WriteError})

	coretest.Eventually(t, 15*time.Second, "the broker's status from its $SYS topics", func() bool {
		r := apitest.Call(t, e, "GET", "/api/v1/broker/status", "admin-a", nil)
		return r.Status == http.StatusOK && r.Str("status") == "ok"
	})

	pub := paho.NewClient(paho.NewClientOptions().AddBroker(broker.URL()).SetClientID("load-" + randomID(t)))
	if tok := pub.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect the load: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	// Paced by the clock, not by the ticker, so a late tick catches up
	// and the generated rate is the one asked for.
	const rate = 200.0
	const loadFor = 18 * time.Second // beyond the monitor's 15 s window
	start := time.Now()
	sent := 0
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for now := range tick.C {
		elapsed := now.Sub(start)
		if elapsed > loadFor {
			break
		}
		for ; sent < int(elapsed.Seconds()*rate); sent++ {
			pub.Publish("load/test", 0, false, []byte("x"))
		}
	}
	generated := float64(sent) / time.Since(start).Seconds()
	// The newest report covers the last second of the load.
	time.Sleep(1500 * time.Millisecond)
	// The rate over the load's last 15 s.
	r := apitest.Call(t, e, "GET", "/api/v1/broker/metrics", "admin-a", nil).Expect(t, "metrics", http.StatusOK)
	per, _ := r.Body["perSecond"].(map[string]any)
	measured, _ := per["publishReceived"].(float64)
	t.Logf("generated %.1f msg/s, the broker's rate %.1f msg/s over %vs (received %v/s, sent %v/s, bytes in %v/s)",
		generated, measured, r.Body["windowSeconds"], per["messagesReceived"], per["publishSent"], per["bytesReceived"])
	if math.Abs(measured-generated) > 0.2*generated {
		t.Errorf("the broker's publish rate %.1f/s is not within 20%% of the generated %.1f/s: %s", measured, generated, r.Raw)
	}
	r = apitest.Call(t, e, "GET", "/api/v1/broker/status", "admin-a", nil).Expect(t, "status", http.StatusOK)
	if r.Str("status") != "ok" || r.Body["connected"] != true || r.Body["clientsConnected"] != 2.0 || r.Str("version") == "" {
		t.Errorf("status under load: %s", r.Raw)
	}
	// The last publishes reach the total with a later report: QoS 0
	// leaves the client's buffer when it will, and the broker reports
	// every sys_interval.
	deadline := time.Now().Add(10 * time.Second)
	for {
		r = apitest.Call(t, e, "GET", "/api/v1/broker/stats", "admin-a", nil).Expect(t, "stats", http.StatusOK)
		tot, _ := r.Body["totals"].(map[string]any)
		if got, _ := tot["publishReceived"].(float64); got >= float64(sent) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("10 s after the load the broker's total of publishes received is below the %d sent: %s", sent, r.Raw)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	apitest.Call(t, e, "GET", "/api/v1/broker/system-stats", "admin-a", nil).Expect(t, "system stats", http.StatusOK)
}

// TestPipelineFeedsBrokerMonitor: the subscriber's telemetry, MessagePack
// and DEFLATE on the wire, lands in the tenant's topic tree and in the
// topic's schema from its decoded readings: a and b always, c sometimes.
func TestPipelineFeedsBrokerMonitor(t *testing.T) {
	pipe := newTestPipeline(t, nil)
	mon, err := brokermon.New(brokermon.Options{SampleEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	pipe.topics = mon
	u, err := codec.ParseUUID(apitest.TenantA)
	if err != nil {
		t.Fatal(err)
	}
	topic := "i/" + codec.EncodeID(u) + "/a/" + randomID(t) + "/endpoints/modbus"
	for i := range 6 {
		readings := []any{
			map[string]any{"deviceName": "plc1", "metric": "a", "value": i},
			map[string]any{"deviceName": "plc1", "metric": "b", "value": 0.25 * float64(i)},
		}
		if i%3 == 0 {
			readings = append(readings, map[string]any{"deviceName": "plc1", "metric": "c", "value": 100 + i})
		}
		raw, err := codec.Encode(map[string]any{"timestamp": "2026-11-22T10:00:00Z", "protocol": "modbus",
			"messages": []any{map[string]any{"readings": readings}}}, codec.EncodeOptions{Format: codec.FormatMsgpackDeflate})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, ok := pipe.prepare(mqttx.Message{Topic: topic, Payload: raw}); !ok {
			t.Fatal("message dropped")
		}
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	brokermon.Register(e.Group("/api/v1"), brokermon.Deps{Monitor: mon, Caller: accountstest.Caller, WriteError: apitest.WriteError})
	r := apitest.Call(t, e, "GET", "/api/v1/broker/topics", "member-a", nil).Expect(t, "topics", http.StatusOK)
	if !strings.Contains(r.Raw, `"topic":"`+topic+`","messages":6,"ownMessages":6`) {
		t.Errorf("the tenant's tree: %s", r.Raw)
	}
	r = apitest.Call(t, e, "GET", "/api/v1/broker/topics/"+topic+"/schema", "member-a", nil).Expect(t, "schema", http.StatusOK)
	readings, _ := r.Body["schema"].(map[string]any)["properties"].(map[string]any)["readings"].(map[string]any)
	if fmt.Sprint(readings["required"]) != "[a b]" {
		t.Errorf("readings required %v, want [a b]: %s", readings["required"], r.Raw)
	}
	props, _ := readings["properties"].(map[string]any)
	if c, _ := props["c"].(map[string]any); c["minimum"] != 100.0 || c["maximum"] != 103.0 || c["type"] != "integer" {
		t.Errorf("c: %v", c)
	}
	if b, _ := props["b"].(map[string]any); b["type"] != "number" || b["maximum"] != 1.25 {
		t.Errorf("b: %v", b)
	}
	apitest.Call(t, e, "GET", "/api/v1/broker/topics/"+topic+"/schema", "admin-b", nil).ExpectError(t, http.StatusNotFound, "not_found")
}
