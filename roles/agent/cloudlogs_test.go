package agent

import (
	"encoding/json"
	"testing"
	"time"
)

// TestCloudLogsSetting: logging.cloudEnabled decides whether the agent's
// log lines are kept for the cloud. Off (the default) the buffer stays
// empty; on, lines wait in it while the agent is not provisioned; off
// again empties it.
func TestCloudLogsSetting(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, nil)
	status := func() map[string]any {
		code, body := r.do("GET", "/v1/buffer/status", "", nil)
		if code != 200 {
			t.Fatalf("buffer status: %d %s", code, body)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	r.agent.p.log.Warn("a line before the setting")
	if st := status(); st["agentLogBufferEnabled"] != false || st["agentLogBufferLogs"] != 0.0 {
		t.Fatalf("default: %v", st)
	}
	if code, body := r.do("PATCH", "/v1/settings", `{"logging":{"cloudEnabled":true}}`, nil); code != 200 {
		t.Fatalf("PATCH cloudEnabled: %d %s", code, body)
	}
	r.agent.p.log.Warn("a line for the cloud")
	st := status()
	if st["agentLogBufferEnabled"] != true || st["agentLogBufferLogs"].(float64) < 1 || st["agentLogPendingBatches"] != 1.0 || st["agentLogBufferBytes"].(float64) < 20 {
		t.Fatalf("enabled, not provisioned: %v", st)
	}
	if code, body := r.do("PATCH", "/v1/settings", `{"logging":{"cloudEnabled":false}}`, nil); code != 200 {
		t.Fatalf("PATCH cloudEnabled off: %d %s", code, body)
	}
	eventually(t, 5*time.Second, "the buffer emptied", func() bool { return status()["agentLogBufferLogs"] == 0.0 })
}
