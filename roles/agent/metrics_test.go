package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/cloud"
)

// TestCloudSyncMetrics: target-state pulls are counted, their failures
// too, and the last success is a timestamp.
func TestCloudSyncMetrics(t *testing.T) {
	var fail atomic.Bool
	cloudSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			http.Error(w, `{"error":{"code":"unavailable","message":"down"}}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"version":1}`))
	}))
	defer cloudSrv.Close()
	r := startAgent(t, t.TempDir(), true, nil)
	st := r.agent.p.st.Load()
	doc, _ := json.Marshal(cloud.Credentials{APIEndpoint: cloudSrv.URL, AgentUUID: "a1", APIKey: "k"})
	ctx := context.Background()
	if err := st.SetMeta(ctx, metaCredentials, string(doc)); err != nil {
		t.Fatal(err)
	}
	if err := st.SetMeta(ctx, metaProvisioned, "true"); err != nil {
		t.Fatal(err)
	}
	if code, body := r.do("POST", "/v1/sync/pull", "", nil); code != 200 {
		t.Fatalf("pull = %d %s", code, body)
	}
	fail.Store(true)
	if code, body := r.do("POST", "/v1/sync/pull", "", nil); code != 502 {
		t.Fatalf("pull from a failing cloud = %d %s", code, body)
	}
	reg := r.metrics
	if v := coretest.MetricValue(t, reg, "edgeplat_agent_cloud_sync_attempts_total", nil); v != 2 {
		t.Fatalf("attempts %v, want 2", v)
	}
	if v := coretest.MetricValue(t, reg, "edgeplat_agent_cloud_sync_failures_total", nil); v != 1 {
		t.Fatalf("failures %v, want 1", v)
	}
	if v := coretest.MetricValue(t, reg, "edgeplat_agent_cloud_sync_last_success_timestamp_seconds", nil); v < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Fatalf("last success %v, want a recent Unix time", v)
	}
}

// TestAgentMetricsPassPromtool runs promtool's linter over the agent's
// /metrics when promtool is installed.
func TestAgentMetricsPassPromtool(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, nil)
	code, body := r.do("GET", "/metrics", "", nil)
	if code != 200 || !strings.Contains(body, "edgeplat_agent_cloud_sync_attempts_total") {
		t.Fatalf("/metrics = %d without the agent's metrics", code)
	}
	coretest.PromtoolCheck(t, "the agent's /metrics", body)
}
