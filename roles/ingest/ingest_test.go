package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/telemetry"
	dto "github.com/prometheus/client_model/go"
)

// TestExactRowsIntegration: N messages in, exactly the distinct rows out;
// in-batch duplicates resolved last-wins; a message delivered twice adds no
// row.
func TestExactRowsIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
		const n, readings = 300, 10
		var msgs []string
		for i := range n {
			msgs = append(msgs, h.message(fmt.Sprintf("dev%d", i%7), readings, base.Add(time.Duration(i)*time.Second), float64(i)))
		}
		// The same device, readings and time with another value, right after
		// the original in the same batch: the later one must win.
		dup := h.message("dev1", readings, base.Add(time.Second), 1000)
		// A message delivered twice (as after a producer retry), in a later
		// batch: it must add nothing.
		again := msgs[10]
		h.add(msgs[0], msgs[1], dup)
		h.add(msgs[2:150]...)
		h.add(again)
		h.start()
		h.add(msgs[150:]...)
		h.drained(30 * time.Second)
		h.stop()

		if got, want := h.rowCount(), int64(n*readings); got != want {
			t.Errorf("rows = %d, want exactly %d", got, want)
		}
		if v := h.value("dev1.r3", base.Add(time.Second)); v != 1003 {
			t.Errorf("dev1.r3 = %g, want the later duplicate's 1003", v)
		}
		if d := h.dlq(); len(d) != 0 {
			t.Errorf("unexpected dead letters: %v", d)
		}
	})
}

// TestDeadLettersIntegration: garbage goes to the DLQ with a reason at once,
// the worker keeps going, and edgeplat_ingestion_dlq_length shows them.
func TestDeadLettersIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		// The batch with the row PostgreSQL refuses is retried with
		// backoff before it is dead-lettered; on a loaded runner that
		// took longer than the harness's 300 ms reclaim idle, and the
		// other worker reclaimed the batch and dead-lettered it a second
		// time. Reclaim is not what this test is about.
		h.cfg.Ingest.ReclaimIdleMS = 5000
		now := time.Now().UTC().Truncate(time.Millisecond)
		h.addRaw(map[string]string{"payload": "no data field"})
		h.add(`{not json`, `{"agentUuid":"nope","deviceName":"d","readings":[{"name":"x","value":1}]}`,
			`{"agentUuid":"`+h.agent+`","deviceName":"d","readings":[]}`)
		h.add(h.message("good", 3, now, 1))
		permanent := 0
		if h.db.Dialect().Engine == "postgres" {
			// PostgreSQL refuses NUL in text: a row no retry can write.
			h.add(h.message("bad\u0000device", 2, now, 1))
			permanent = 1
		}
		h.start()
		h.drained(30 * time.Second)
		want := 4 + permanent
		coretest := func() bool { return len(h.dlq()) == want }
		deadline := time.Now().Add(10 * time.Second)
		for !coretest() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		dead := h.dlq()
		if len(dead) != want {
			t.Fatalf("dead letters = %d, want %d: %v", len(dead), want, dead)
		}
		for _, d := range dead {
			if d.Values["reason"] == "" || d.Values["originalId"] == "" || d.Values["stream"] != h.stream() {
				t.Errorf("dead letter lacks reason, id or stream: %v", d.Values)
			}
		}
		if permanent == 1 && !strings.Contains(dead[len(dead)-1].Values["reason"], "NUL byte") {
			t.Errorf("permanent failure reason = %q", dead[len(dead)-1].Values["reason"])
		}
		if got := h.rowCount(); got != 3 {
			t.Errorf("rows = %d, want the good message's 3", got)
		}
		waitGauge(t, h, "edgeplat_ingestion_dlq_length", float64(want))
		h.stop()
	})
}

// TestReclaimAndPoisonIntegration: entries a dead consumer left pending are
// taken over; one that was delivered too often goes to the DLQ.
func TestReclaimAndPoisonIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		group := telemetry.WriterGroup(h.tenant)
		if err := h.store.EnsureGroup(ctx, h.stream(), group, "0"); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		h.add(h.message("crashed", 4, now, 1))
		h.add(h.message("poison", 4, now, 1))
		// A consumer takes both and dies; the poison one was already
		// taken over and lost MAX_RETRIES more times.
		got, err := h.store.ReadGroup(ctx, h.stream(), group, "dead-consumer", 2, 0)
		if err != nil || len(got) != 2 {
			t.Fatalf("read %d, %v", len(got), err)
		}
		for range h.cfg.Ingest.MaxRetries {
			time.Sleep(5 * time.Millisecond)
			if _, _, err := h.store.AutoClaim(ctx, h.stream(), group, "dead-consumer", time.Millisecond, got[1].ID, 1); err != nil {
				t.Fatal(err)
			}
		}
		h.start()
		h.drained(30 * time.Second)
		if rows := h.rowCount(); rows != 4 {
			t.Errorf("rows = %d, want the reclaimed message's 4", rows)
		}
		dead := h.dlq()
		if len(dead) != 1 || dead[0].Values["originalId"] != got[1].ID || !strings.Contains(dead[0].Values["reason"], "times without being acknowledged") {
			t.Errorf("dead letters = %v, want the poison entry", dead)
		}
		h.stop()
	})
}

// TestHealthAndMetricsIntegration checks the /health shape and the eight
// ingestion_* metrics on the role's own port.
func TestHealthAndMetricsIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		h.start()
		defer h.stop()
		url := fmt.Sprintf("http://127.0.0.1:%d", h.cfg.Ingest.Port)
		var body map[string]any
		deadline := time.Now().Add(5 * time.Second)
		for {
			resp, err := http.Get(url + "/health")
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&body)
				resp.Body.Close()
				if err == nil && resp.StatusCode == 200 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("/health: %v %v", err, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, k := range []string{"status", "uptime", "workers", "streamLag", "circuitBreaker"} {
			if _, ok := body[k]; !ok {
				t.Errorf("/health lacks %s: %v", k, body)
			}
		}
		if body["status"] != "ok" || body["circuitBreaker"] != "closed" || body["workers"].(float64) < 1 {
			t.Errorf("/health = %v", body)
		}
		mfs, err := h.rt.Metrics.Gather()
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, mf := range mfs {
			have[mf.GetName()] = true
		}
		for _, name := range []string{"edgeplat_ingestion_messages_processed_total", "edgeplat_ingestion_readings_inserted_total", "edgeplat_ingestion_dlq_length",
			"edgeplat_ingestion_stream_length", "edgeplat_ingestion_worker_lag_seconds", "edgeplat_ingestion_workers", "edgeplat_ingestion_batch_duration_seconds",
			"edgeplat_ingestion_db_insert_duration_seconds", "go_goroutines"} {
			if !have[name] {
				t.Errorf("metric %s missing", name)
			}
		}
	})
}

func gauge(h *harness, name string) (float64, bool) {
	mfs, err := h.rt.Metrics.Gather()
	if err != nil {
		return 0, false
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			m := mf.GetMetric()[0]
			return metricValue(m), true
		}
	}
	return 0, false
}

func metricValue(m *dto.Metric) float64 {
	if m.GetGauge() != nil {
		return m.GetGauge().GetValue()
	}
	return m.GetCounter().GetValue()
}

func waitGauge(t *testing.T, h *harness, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if v, ok := gauge(h, name); ok && v == want {
			return
		}
		if time.Now().After(deadline) {
			v, _ := gauge(h, name)
			t.Fatalf("%s = %g, want %g", name, v, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAgentLogsIntegration: log batches land in agent_logs, a malformed one
// in the dead-letter stream, and a pending batch left by a dead consumer is
// taken over.
func TestAgentLogsIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		logs := telemetry.LogsStream(h.tenant)
		defer h.store.Delete(ctx, logs)
		add := func(data string) string {
			id, err := h.store.Add(ctx, logs, map[string]string{telemetry.StreamField: data}, 0)
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		line := func(msg string) string {
			return `{"level":"info","message":"` + msg + `","timestamp":1763805600000,"component":"manager","appId":3}`
		}
		if err := h.store.EnsureGroup(ctx, logs, telemetry.LogWriterGroup(h.tenant), "0"); err != nil {
			t.Fatal(err)
		}
		add(`{"agentUuid":"` + h.agent + `","logs":[` + line("a") + `,` + line("b") + `]}`)
		if _, err := h.store.ReadGroup(ctx, logs, telemetry.LogWriterGroup(h.tenant), "dead-consumer", 1, 0); err != nil {
			t.Fatal(err)
		}
		add(`{"agentUuid":"` + h.agent + `","logs":[` + line("c") + `]}`)
		add(`{"logs":"not a batch"}`)
		h.start()
		defer h.stop()
		deadline := time.Now().Add(15 * time.Second)
		for (h.logRows() < 3 || len(h.dlq()) < 1) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := h.logRows(); n != 3 {
			t.Errorf("agent_logs rows = %d, want 3", n)
		}
		if d := h.dlq(); len(d) != 1 || !strings.Contains(d[0].Values["reason"], "agent log batch") {
			t.Errorf("dead letters = %v", d)
		}
		var data string
		if err := h.db.SQL().QueryRowContext(ctx, `SELECT data FROM agent_logs WHERE tenant_id = $1 AND message = 'c'`, h.tenant).Scan(&data); err != nil || !strings.Contains(data, `"appId"`) {
			t.Errorf("extra fields not kept: %q %v", data, err)
		}
	})
}
