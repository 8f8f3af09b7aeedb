package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
)

// embeddedBroker is an in-process mochi broker on a fixed port, so that it
// can stop and start again where the agent reconnects. It is built here,
// not taken from roles/broker: roles never import each other.
type embeddedBroker struct {
	t    *testing.T
	port int
	s    *mochi.Server
}

func startEmbeddedBroker(t *testing.T) *embeddedBroker {
	b := &embeddedBroker{t: t, port: coretest.FreePort(t)}
	b.start()
	t.Cleanup(b.stop)
	return b
}

func (b *embeddedBroker) url() string { return "tcp://127.0.0.1:" + strconv.Itoa(b.port) }

func (b *embeddedBroker) start() {
	b.t.Helper()
	var ln net.Listener
	var err error
	// The port was ours a moment ago; after a stop it may linger briefly.
	eventually(b.t, 10*time.Second, "the broker port", func() bool {
		ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)))
		return err == nil
	})
	s := mochi.New(&mochi.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := s.AddHook(new(auth.AllowHook), nil); err != nil {
		b.t.Fatal(err)
	}
	if err := s.AddListener(listeners.NewNet("tcp", ln)); err != nil {
		b.t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		b.t.Fatal(err)
	}
	b.s = s
}

func (b *embeddedBroker) stop() {
	if b.s == nil {
		return
	}
	done := make(chan error, 1)
	go func() { done <- b.s.Close() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		b.t.Error("embedded broker did not close within 5 s")
	}
	b.s = nil
}

// reportWatch keeps the reports arriving on one agent's prefix.
type reportWatch struct {
	mu      sync.Mutex
	state   []control.StateReport
	metrics []control.MetricsReport
	arrived []time.Time
}

func watchReports(t *testing.T, brokerURL, prefix string) *reportWatch {
	w := &reportWatch{}
	opts := paho.NewClientOptions().AddBroker(brokerURL).SetClientID("report-watch").SetCleanSession(true).
		SetAutoReconnect(true).SetConnectRetry(true).SetConnectRetryInterval(100 * time.Millisecond).SetMaxReconnectInterval(200 * time.Millisecond).
		SetOnConnectHandler(func(c paho.Client) {
			c.Subscribe(control.ReportTopic(prefix, control.ReportState), 1, func(_ paho.Client, m paho.Message) {
				var r control.StateReport
				if err := json.Unmarshal(m.Payload(), &r); err != nil {
					t.Errorf("state report is not JSON: %q", m.Payload())
					return
				}
				w.mu.Lock()
				w.state, w.arrived = append(w.state, r), append(w.arrived, time.Now())
				w.mu.Unlock()
			}).Wait()
			c.Subscribe(control.ReportTopic(prefix, control.ReportMetrics), 1, func(_ paho.Client, m paho.Message) {
				var r control.MetricsReport
				if err := json.Unmarshal(m.Payload(), &r); err != nil {
					t.Errorf("metrics report is not JSON: %q", m.Payload())
					return
				}
				w.mu.Lock()
				w.metrics = append(w.metrics, r)
				w.mu.Unlock()
			}).Wait()
		})
	c := paho.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("report watcher: %v", tok.Error())
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return w
}

func (w *reportWatch) counts() (int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.state), len(w.metrics)
}

// TestStateReportsIntegration: the agent publishes a state report and a
// metrics report on its prefix as soon as the platform connection is up,
// then every intervals.stateReportMs (10 s by default: nothing more for
// 3 s; after a PATCH to 1000, one a second). While the broker is down it
// publishes nothing and queues nothing; after the broker is back a report
// goes out at once, made after the restart.
func TestStateReportsIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs an agent against an embedded broker for ~15 s")
	}
	broker := startEmbeddedBroker(t)
	r := startAgent(t, t.TempDir(), true, nil)
	const prefix = "i/AAAAAAAAAAAAAAAAAAAAAA/a/BBBBBBBBBBBBBBBBBBBBBB"
	w := watchReports(t, broker.url(), prefix)
	// A Modbus device nobody answers for: its health is in the report.
	if code, body := r.do("POST", "/v1/endpoints", fmt.Sprintf(`{"name":"press-9","protocol":"modbus","poll_interval":500,
		"connection":{"host":"127.0.0.1","port":%d,"unitId":1},"data_points":[{"name":"r0","register":"holding:0"}]}`, coretest.FreePort(t)), nil); code != 201 {
		t.Fatalf("endpoint: %d %s", code, body)
	}
	if code, body := r.do("POST", "/v1/publish/destinations", `{"name":"cloud","type":"platform"}`, nil); code != 201 {
		t.Fatalf("platform destination: %d %s", code, body)
	}
	if err := r.agent.p.pub.SetCredentials(t.Context(), dest.PlatformCredentials{BrokerURL: broker.url(), ClientID: "agent-report-test", TopicPrefix: prefix}, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the first state and metrics reports", func() bool { s, m := w.counts(); return s >= 1 && m >= 1 })

	w.mu.Lock()
	st, mr := w.state[0], w.metrics[0]
	w.mu.Unlock()
	id := r.agent.p.id.Load()
	if st.UUID != id.UUID || st.Name != id.Name || st.Version == "" || st.State != StateRunning || st.Mode != "standalone" ||
		st.Buffer["transportPublishMode"] == nil || st.Buffer["agentLogBufferEnabled"] != false || st.Endpoints == nil || st.Timestamp == 0 ||
		st.Health["subsystems"] == nil || st.Health["overall"] == nil {
		t.Fatalf("state report %+v", st)
	}
	if mr.MemoryTotal == 0 || mr.MemoryUsed > mr.MemoryTotal || mr.MemoryPercent <= 0 || mr.MemoryPercent > 100 ||
		mr.CPUUsage < 0 || mr.CPUUsage > 100 || mr.StorageTotal == 0 || mr.StorageUsed > mr.StorageTotal ||
		mr.Uptime <= 0 || mr.AgentUptime <= 0 || mr.AgentUptime > mr.Uptime+1 || mr.Hostname == "" {
		t.Fatalf("metrics report %+v", mr)
	}
	if mr.Temperature != nil && (*mr.Temperature < -40 || *mr.Temperature > 150) {
		t.Fatalf("temperature %v °C", *mr.Temperature)
	}

	// The default interval is 10 s: none more within 3 s.
	time.Sleep(3 * time.Second)
	if s, _ := w.counts(); s != 1 {
		t.Fatalf("%d state reports within 3 s at the default 10 s interval", s)
	}
	if code, body := r.do("PATCH", "/v1/settings", `{"intervals":{"stateReportMs":1000}}`, nil); code != 200 {
		t.Fatalf("PATCH stateReportMs: %d %s", code, body)
	}
	eventually(t, 10*time.Second, "three more reports at 1 s", func() bool { s, m := w.counts(); return s >= 4 && m >= 4 })
	w.mu.Lock()
	if eps := w.state[len(w.state)-1].Endpoints; len(eps) != 1 || eps[0].Name != "press-9" || eps[0].Protocol != "modbus" || !eps[0].Enabled ||
		eps[0].Connected || eps[0].Status == "" || eps[0].Status == "connected" || eps[0].Status == "stopped" {
		t.Errorf("endpoints in the state report: %+v", eps)
	}
	for i := 2; i < len(w.state); i++ {
		// Never faster than the interval (the service sends at a tick once
		// it has passed).
		if gap := w.state[i].Timestamp - w.state[i-1].Timestamp; gap < 1000 {
			t.Errorf("state reports %d and %d made %d ms apart, under stateReportMs", i-1, i, gap)
		}
	}
	w.mu.Unlock()

	broker.stop()
	eventually(t, 10*time.Second, "the agent to see the broker gone", func() bool { return !r.agent.p.pub.PlatformConnected() })
	sentBefore := coretest.MetricValue(t, r.metrics, "edgeplat_agent_reports_sent_total", map[string]string{"report": "state"})
	time.Sleep(3 * time.Second) // three intervals of outage
	if sent := coretest.MetricValue(t, r.metrics, "edgeplat_agent_reports_sent_total", map[string]string{"report": "state"}); sent != sentBefore {
		t.Fatalf("%v state reports counted as sent while the broker was down", sent-sentBefore)
	}
	before, _ := w.counts()
	restarted := time.Now()
	broker.start()
	eventually(t, 30*time.Second, "reports again after the outage", func() bool { s, _ := w.counts(); return s >= before+2 })
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := before; i < len(w.state); i++ {
		if made := time.UnixMilli(w.state[i].Timestamp); made.Before(restarted.Add(-time.Second)) {
			t.Errorf("state report %d after the outage was made at %s, before the broker came back at %s: it was queued", i, made, restarted)
		}
	}
}
