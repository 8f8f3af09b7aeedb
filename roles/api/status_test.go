package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/mqttx"
	memstore "github.com/edgeplat/edgeplat/core/streamstore/memory"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// sseEvent is one Server-Sent Event as a test reads it.
type sseEvent struct{ name, data string }

// openSSE opens url with bearer and returns its events as they come; the
// stream closes with the test.
func openSSE(t *testing.T, url, bearer string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	out := make(chan sseEvent, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data += strings.TrimPrefix(line, "data: ")
			case line == "" && ev.name != "":
				out <- ev
				ev = sseEvent{}
			}
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return out
}

// nextStatus waits for the next "status" event on ch, skipping others.
func nextStatus(t *testing.T, ch <-chan sseEvent, what string) StatusEvent {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("%s: stream ended", what)
			}
			if ev.name != "status" {
				continue
			}
			var se StatusEvent
			if err := json.Unmarshal([]byte(ev.data), &se); err != nil {
				t.Fatalf("%s: %v: %s", what, err, ev.data)
			}
			return se
		case <-deadline:
			t.Fatalf("%s: no status event", what)
		}
	}
}

// runServices runs the services' Run until the test ends.
func runServices(t *testing.T, svcs ...lifecycle.Service) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range svcs {
		wg.Go(func() { _ = s.Run(ctx) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// TestAgentStatusIntegration: an agent's status follows its traffic, with
// api.agent_offline_after as the silence that makes it offline; each change
// is an event on the agent's live stream, on the tenant's event stream and
// in the audit log, and lastSeen moves with the traffic.
func TestAgentStatusIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		h, _, pipe, svcs := roleServices(t, d, testLicence(t, 0), func(c *config.Config) {
			c.API.AgentOfflineAfter = 2 * time.Second
			// The test polls admin routes faster than their limits allow.
			c.Auth.RateLimitAdmin, c.Auth.RateLimitGlobal = 0, 0
		})
		var seen *lastSeen
		var watch *statusWatch
		for _, s := range svcs {
			switch s := s.(type) {
			case *lastSeen:
				seen = s
			case *statusWatch:
				watch = s
			}
		}
		if seen == nil || watch == nil || watch.offlineAfter != 2*time.Second {
			t.Fatalf("New built no last-seen flusher or status watch with api.agent_offline_after: %+v", watch)
		}
		runServices(t, seen, watch)
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		tok := admin(t, h)

		a := call(t, h, "POST", "/api/v1/agents", tok, map[string]string{"name": "press"})
		if a.status != http.StatusCreated || a.str("status") != "never-seen" || a.body["lastSeen"] != nil {
			t.Fatalf("new agent: %d %s", a.status, a.raw)
		}
		agent := a.str("uuid")
		tu, _ := codec.ParseUUID(a.str("tenantId"))
		au, _ := codec.ParseUUID(agent)
		topic := "i/" + codec.EncodeID(tu) + "/a/" + codec.EncodeID(au) + "/endpoints/modbus"
		tenantEvents := openSSE(t, srv.URL+"/api/v1/agents/events", tok)
		agentEvents := openSSE(t, srv.URL+"/api/v1/agents/"+agent+"/stream", tok)

		publish := func(seq int) {
			t.Helper()
			raw := encode(t, envelopeFor(seq, float64(seq)), codec.FormatMsgpackDeflate)
			if errs := pipe.handleBatch(t.Context(), []mqttx.Message{{Topic: topic, Payload: raw, QoS: 1}}); errs[0] != nil {
				t.Fatal(errs[0])
			}
		}
		get := func() reply { return call(t, h, "GET", "/api/v1/agents/"+agent, tok, nil) }
		publish(1)
		var first time.Time
		coretest.Eventually(t, 10*time.Second, "online after telemetry", func() bool {
			r := get()
			first, _ = time.Parse(time.RFC3339Nano, r.str("lastSeen"))
			return r.str("status") == "online" && !first.IsZero()
		})
		for name, ch := range map[string]<-chan sseEvent{"tenant": tenantEvents, "agent": agentEvents} {
			if ev := nextStatus(t, ch, name+" stream"); ev.Status != "online" || ev.Previous != "never-seen" || ev.AgentUUID != agent || ev.LastSeen == nil {
				t.Errorf("%s stream: %+v, want online from never-seen", name, ev)
			}
		}
		// lastSeen moves with later traffic, and never back.
		time.Sleep(20 * time.Millisecond)
		publish(2)
		coretest.Eventually(t, 10*time.Second, "lastSeen to move", func() bool {
			ls, _ := time.Parse(time.RFC3339Nano, get().str("lastSeen"))
			return ls.After(first)
		})
		if err := writeLastSeen(t.Context(), d, []seenRow{{tenant: tu.String(), agent: agent, at: first.Add(-time.Hour)}}); err != nil {
			t.Fatal(err)
		}
		if ls, _ := time.Parse(time.RFC3339Nano, get().str("lastSeen")); !ls.After(first) {
			t.Errorf("an older time moved lastSeen back to %v", ls)
		}

		// Silence: offline within the configured 2 s (plus a look).
		if ev := nextStatus(t, agentEvents, "agent stream"); ev.Status != "offline" || ev.Previous != "online" {
			t.Errorf("after the silence: %+v, want offline", ev)
		}
		if r := get(); r.str("status") != "offline" {
			t.Errorf("GET after the silence: %s", r.raw)
		}
		if ev := nextStatus(t, tenantEvents, "tenant stream"); ev.Status != "offline" {
			t.Errorf("tenant stream after the silence: %+v", ev)
		}
		publish(3)
		if ev := nextStatus(t, agentEvents, "agent stream"); ev.Status != "online" || ev.Previous != "offline" {
			t.Errorf("after traffic resumed: %+v, want online", ev)
		}
		if r := call(t, h, "PATCH", "/api/v1/agents/"+agent+"/active", tok, map[string]bool{"active": false}); r.str("status") != "disabled" {
			t.Errorf("disabled agent: %d %s", r.status, r.raw)
		}
		if ev := nextStatus(t, tenantEvents, "tenant stream"); ev.Status != "online" {
			t.Errorf("tenant stream: %+v, want the online again", ev)
		}
		if ev := nextStatus(t, tenantEvents, "tenant stream"); ev.Status != "disabled" {
			t.Errorf("tenant stream after disabling: %+v", ev)
		}

		// Another tenant's event stream carries its own agents' changes
		// only: the first it gets is about its agent, none of the above.
		tokB := call(t, h, "POST", "/api/v1/auth/register", "", map[string]string{"email": "b@example.com", "password": "correct horse battery"}).str("accessToken")
		eventsB := openSSE(t, srv.URL+"/api/v1/agents/events", tokB)
		b := call(t, h, "POST", "/api/v1/agents", tokB, map[string]string{"name": "b-press"})
		tb, _ := codec.ParseUUID(b.str("tenantId"))
		bu, _ := codec.ParseUUID(b.str("uuid"))
		topic = "i/" + codec.EncodeID(tb) + "/a/" + codec.EncodeID(bu) + "/endpoints/modbus"
		publish(5)
		if ev := nextStatus(t, eventsB, "tenant B's stream"); ev.AgentUUID != b.str("uuid") || ev.Status != "online" {
			t.Errorf("tenant B's first event: %+v, want its own agent online", ev)
		}
		if r := call(t, h, "GET", "/api/v1/agents/"+agent+"/stream", tokB, nil); r.status != http.StatusNotFound {
			t.Errorf("tenant B on tenant A's agent stream: %d %s", r.status, r.raw)
		}

		// The audit log has each change once, in order (it is written
		// after the event is published).
		want := "never-seen>online online>offline offline>online online>disabled"
		var got []string
		coretest.Eventually(t, 10*time.Second, "audit trail "+want, func() bool {
			r := call(t, h, "GET", "/api/v1/audit/events?kind="+AuditAgentStatus, tok, nil)
			got = nil
			events, ok := r.body["events"].([]any)
			if !ok {
				t.Fatalf("audit events: %d %s", r.status, r.raw)
			}
			for _, e := range events {
				ev := e.(map[string]any)
				det := ev["detail"].(map[string]any)
				if ev["target"] != agent || ev["actorKind"] != "system" {
					t.Errorf("audit event %v", ev)
				}
				got = append([]string{det["from"].(string) + ">" + det["to"].(string)}, got...)
			}
			return strings.Join(got, " ") == want
		})
	})
}

// TestStatusChangeAnnouncedOnceIntegration: replicas looking for changes
// at the same time announce each one once between them.
func TestStatusChangeAnnouncedOnceIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, acc := accessEngine(t, d, testTokens(t), testLicence(t, 0))
		tok := admin(t, e)
		var agents []string
		for i := range 20 {
			agents = append(agents, call(t, e, "POST", "/api/v1/agents", tok, map[string]string{"name": "a" + string(rune('a'+i))}).str("uuid"))
		}
		tenant := call(t, e, "GET", "/api/v1/agents/"+agents[0], tok, nil).str("tenantId")
		now := time.Now()
		var rows []seenRow
		for _, a := range agents {
			rows = append(rows, seenRow{tenant: tenant, agent: a, at: now})
		}
		if err := writeLastSeen(t.Context(), d, rows); err != nil {
			t.Fatal(err)
		}
		streams, err := memstore.New(memstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { streams.Close() })
		var mu sync.Mutex
		announced := map[string]int{}
		replica := func() *statusWatch {
			return &statusWatch{db: d, streams: streams, log: acc.log, m: newStatusMetrics(metrics.NewRegistry()), offlineAfter: time.Minute,
				now: time.Now, audit: func(_ context.Context, e accounts.Event) error {
					mu.Lock()
					announced[e.Target+" "+e.Detail["to"].(string)]++
					mu.Unlock()
					return nil
				}}
		}
		var wg sync.WaitGroup
		for range 4 {
			w := replica()
			wg.Go(func() {
				if err := w.pass(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if len(announced) != len(agents) {
			t.Errorf("%d changes announced, want %d", len(announced), len(agents))
		}
		for k, n := range announced {
			if n != 1 || !strings.HasSuffix(k, " online") {
				t.Errorf("%s announced %d times", k, n)
			}
		}
	})
}
