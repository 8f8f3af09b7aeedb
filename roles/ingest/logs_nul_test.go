package ingest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// TestAgentLogsWithNULIntegration: a device's log line whose text or extra
// fields hold NUL, which PostgreSQL's text and jsonb refuse, is written
// with U+FFFD in its place instead of failing its batch on every retry and
// holding up the lines behind it.
func TestAgentLogsWithNULIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		logs := telemetry.LogsStream(h.tenant)
		defer h.store.Delete(ctx, logs)
		if err := h.store.EnsureGroup(ctx, logs, telemetry.LogWriterGroup(h.tenant), "0"); err != nil {
			t.Fatal(err)
		}
		for _, data := range []string{
			`{"agentUuid":"` + h.agent + `","logs":[{"level":"error","message":"bad\u0000frame","timestamp":1763805600000,"component":"mod\u0000bus","frame":{"raw\u0000":"\u0000\u0001"}}]}`,
			`{"agentUuid":"` + h.agent + `","logs":[{"level":"info","message":"after","timestamp":1763805600001}]}`,
		} {
			if _, err := h.store.Add(ctx, logs, map[string]string{telemetry.StreamField: data}, 0); err != nil {
				t.Fatal(err)
			}
		}
		h.start()
		defer h.stop()
		coretest.Eventually(t, 15*time.Second, "both log lines written", func() bool { return h.logRows() == 2 })
		var msg, component, data string
		if err := h.db.SQL().QueryRowContext(ctx, `SELECT message, component, data FROM agent_logs WHERE tenant_id = $1 AND level = 'error'`, h.tenant).
			Scan(&msg, &component, &data); err != nil {
			t.Fatal(err)
		}
		if msg != "bad\uFFFDframe" || component != "mod\uFFFDbus" {
			t.Errorf("message %q, component %q", msg, component)
		}
		for _, want := range []string{"raw\uFFFD", "\uFFFD\\u0001"} {
			if !strings.Contains(data, want) {
				t.Errorf("extra fields %s lack %q", data, want)
			}
		}
		if d := h.dlq(); len(d) != 0 {
			t.Errorf("dead letters = %v", d)
		}
	})
}
