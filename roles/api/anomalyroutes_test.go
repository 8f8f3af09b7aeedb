package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/api/anomaly"
)

// TestAgentEventsOverMQTTIntegration: an event an agent publishes on its
// events topic through the real Mosquitto is stored once although it
// arrives twice (the agent replays it after an outage, or the broker
// redelivers it); an unusable one is acknowledged and dropped.
func TestAgentEventsOverMQTTIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		brokerAddr := coretest.MQTTAddr(t)
		ctx := t.Context()
		tenant, agent := randomUUID(t), randomUUID(t)
		tenantKey, _ := codec.IDFromUUID(tenant)
		agentKey, _ := codec.IDFromUUID(agent)
		now := d.Dialect().TimeArg(time.Now())
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`INSERT INTO tenants (uuid, name, created_at) VALUES ($1, 'events', $2)`, []any{tenant, now}},
			{`INSERT INTO agents (uuid, tenant_uuid, name, created_at, updated_at) VALUES ($1, $2, 'a', $3, $3)`, []any{agent, tenant, now}},
		} {
			if _, err := d.SQL().ExecContext(ctx, q.sql, q.args...); err != nil {
				t.Fatal(err)
			}
		}
		reg := metrics.NewRegistry()
		an := anomaly.New(anomaly.Deps{DB: d, Registerer: reg, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		ae := &agentEvents{x: an, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		mo := mqttx.DefaultOptions()
		mo.BrokerURL, mo.CleanSession, mo.Registerer, mo.Name = "tcp://"+brokerAddr, true, reg, "api-mqtt"
		mo.ClientID = "events-" + agentKey[:8]
		client, err := mqttx.New(mo)
		if err != nil {
			t.Fatal(err)
		}
		if err := client.Subscribe("i/"+tenantKey+"/a/+/events", 1, ae.handle); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- lifecycle.Run(rctx, lifecycle.Options{}, client) }()
		defer func() { cancel(); <-done }()
		coretest.Eventually(t, 10*time.Second, "the subscriber to connect", func() bool { return client.Check(ctx) == nil })

		pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID("agent-" + agentKey[:8]))
		if tok := pub.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("connect: %v", tok.Error())
		}
		defer pub.Disconnect(100)
		publish := func(payload []byte) {
			t.Helper()
			if tok := pub.Publish("i/"+tenantKey+"/a/"+agentKey+"/events", 1, false, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
				t.Fatalf("publish: %v", tok.Error())
			}
		}
		event := func(id string) []byte {
			b, _ := json.Marshal(control.Event{ID: id, Kind: control.EventAnomalyAlert, Severity: control.SeverityWarning,
				Timestamp: time.Now().UnixMilli(), Data: json.RawMessage(`{"metric":"plc1.temperature"}`)})
			return b
		}
		publish(event("e1"))
		publish(event("e1"))
		publish([]byte(`{"id":"bad"}`))
		publish(event("e2"))
		count := func() (n int) {
			if err := d.SQL().QueryRowContext(ctx, `SELECT count(*) FROM agent_events WHERE agent_uuid = $1`, agent).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		stored := func(id string) bool {
			var n int
			_ = d.SQL().QueryRowContext(ctx, `SELECT count(*) FROM agent_events WHERE agent_uuid = $1 AND event_id = $2`, agent, id).Scan(&n)
			return n > 0
		}
		// One topic's messages are handled in order, so once e2 is in, both
		// copies of e1 and the bad one have been handled.
		coretest.Eventually(t, 10*time.Second, "the last event", func() bool { return stored("e2") })
		if n := count(); n != 2 {
			t.Fatalf("%d events stored, want 2 (e1 once, e2)", n)
		}
		// The handler counts an event after storing it: the count may
		// trail the row by a moment.
		var got float64
		coretest.Eventually(t, 10*time.Second, "4 events counted (stored twice, a repeat, an invalid one)", func() bool {
			got = counter(t, &rt.Runtime{Metrics: reg}, "edgeplat_api_agent_events_total")
			return got >= 4
		})
		if got != 4 {
			t.Errorf("%g events counted, want 4 (stored twice, a repeat, an invalid one)", got)
		}
	})
}

// TestPipelineFeedsAnomalyEvaluatorIntegration: telemetry the pipeline
// appends reaches the anomaly evaluator the role runs, a z-score rule made
// over REST opens an incident on it, and an e-mail alert rule's mail
// leaves through the role's SMTP mailer.
func TestPipelineFeedsAnomalyEvaluatorIntegration(t *testing.T) {
	d := dbtest.Migrated(t, "sqlite")
	smtp := newSMTPServer(t)
	smtpHost, smtpPort, _ := net.SplitHostPort(smtp.ln.Addr().String())
	h, r, pipe, services := roleServices(t, d, testLicence(t, 0), func(cfg *config.Config) {
		cfg.Auth.SMTPHost, cfg.Auth.SMTPFrom = smtpHost, "alerts@example.com"
		cfg.Auth.SMTPPort, _ = strconv.Atoi(smtpPort)
	})
	tok := admin(t, h)
	if r := call(t, h, "POST", "/api/v1/anomaly/alerts", tok, map[string]any{"name": "mail ops",
		"target": map[string]any{"type": "email", "to": "ops@example.com"}}); r.status != http.StatusCreated {
		t.Fatalf("create alert rule: %d %s", r.status, r.raw)
	}
	agent := call(t, h, "POST", "/api/v1/agents", tok, map[string]any{"name": "plc-gateway"}).str("uuid")
	tenant := call(t, h, "GET", "/api/v1/auth/me", tok, nil).str("tenantId")
	if r := call(t, h, "POST", "/api/v1/anomaly/rules", tok, map[string]any{"name": "spikes", "type": "zscore", "metric": "temp",
		"k": 3, "window": "10m", "minSamples": 5}); r.status != http.StatusCreated {
		t.Fatalf("create rule: %d %s", r.status, r.raw)
	}
	var run []lifecycle.Service
	for _, s := range services {
		switch s.(type) {
		case *anomaly.Evaluator, *anomaly.Dispatcher:
			run = append(run, s)
		}
	}
	if len(run) != 2 {
		t.Fatalf("New built %d anomaly services, want the evaluator and the dispatcher", len(run))
	}
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lifecycle.Run(rctx, lifecycle.Options{}, run...) }()
	defer func() { cancel(); <-done }()
	// Start has loaded the rule once the evaluator counts it.
	coretest.Eventually(t, 10*time.Second, "the evaluator to load the rule", func() bool {
		return gauge(t, r, "edgeplat_api_anomaly_rules") == 1
	})

	tenantKey, _ := codec.IDFromUUID(tenant)
	agentKey, _ := codec.IDFromUUID(agent)
	topic := "i/" + tenantKey + "/a/" + agentKey + "/endpoints/modbus"
	for seq, v := range []float64{20, 21, 20, 21, 20, 21, 95} {
		raw, err := codec.Encode(envelopeFor(seq+1, v), codec.EncodeOptions{Format: codec.FormatMsgpack})
		if err != nil {
			t.Fatal(err)
		}
		if errs := pipe.handleBatch(t.Context(), []mqttx.Message{{Topic: topic, Payload: raw, QoS: 1}}); errs[0] != nil {
			t.Fatal(errs[0])
		}
	}
	var list []any
	coretest.Eventually(t, 10*time.Second, "an incident", func() bool {
		r := call(t, h, "GET", "/api/v1/anomaly/incidents", tok, nil)
		list, _ = r.body["incidents"].([]any)
		return len(list) > 0
	})
	inc := list[0].(map[string]any)
	if sensor := inc["sensor"].(map[string]any); len(list) != 1 || sensor["agentUuid"] != agent || sensor["metric"] != "plc1.temp" || inc["value"] != 95.0 {
		t.Fatalf("incidents %v", list)
	}
	coretest.Eventually(t, 10*time.Second, "the alert mail", func() bool {
		smtp.mu.Lock()
		defer smtp.mu.Unlock()
		return strings.Contains(smtp.data, "Subject: [edgeplat] warning incident.opened: spikes on plc1.temp")
	})
}

// gauge is the value of the gauge name in r's registry.
func gauge(t *testing.T, r *rt.Runtime, name string) float64 {
	t.Helper()
	mfs, err := r.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return 0
}
