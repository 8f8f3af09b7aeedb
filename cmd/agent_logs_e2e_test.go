package cmd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestAgentLogsReachTheCloud: with logging.cloudEnabled an agent's warn
// line is in GET /agents/:uuid/logs within 10 s, through the real path:
// the agent's shipper, POST /device/:uuid/logs, the logs stream and the
// ingest role writing agent_logs (all-in-one runs them all). A second,
// standalone agent provisioned against the same cloud then loses it: with
// the cloud stopped its log buffer stays within its bound while the drop
// counter counts, and the breaker opens.
func TestAgentLogsReachTheCloud(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs all-in-one and an agent")
	}
	clearEnv(t)
	p := freeAIOPorts(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	exit := make(chan int, 1)
	go func() { exit <- execute(ctx, p.args(filepath.Join(t.TempDir(), "data")), io.Discard, &stderr) }()
	stopCloud := func() {
		cancel()
		select {
		case <-exit:
		case <-time.After(20 * time.Second):
			t.Error("all-in-one did not stop")
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			stopCloud()
		}
	})
	agentURL := fmt.Sprintf("http://127.0.0.1:%d", p.agent)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d/api/v1", p.api)
	coretest.Eventually(t, 20*time.Second, "all-in-one ready", func() bool {
		code, _, err := get(agentURL + "/v1/readiness")
		code2, _, err2 := get(fmt.Sprintf("http://127.0.0.1:%d/health", p.api))
		return err == nil && err2 == nil && code == http.StatusOK && code2 == http.StatusOK
	})
	postJSON(t, apiURL+"/auth/bootstrap-admin", "", `{"email":"ops@example.com","password":"correct horse battery"}`, http.StatusCreated)
	access, _ := postJSON(t, apiURL+"/auth/login", "", `{"email":"ops@example.com","password":"correct horse battery"}`, http.StatusOK)["accessToken"].(string)
	provision := func(agentURL string) string {
		t.Helper()
		pk := postJSON(t, apiURL+"/provisioning/keys", access, ``, http.StatusCreated)
		out := postJSON(t, agentURL+"/v1/provision", "", fmt.Sprintf(`{"provisioningApiKey":%q,"apiEndpoint":"http://127.0.0.1:%d"}`, pk["key"], p.api), http.StatusOK)
		dev, _ := out["device"].(map[string]any)
		uuid, _ := dev["uuid"].(string)
		if uuid == "" {
			t.Fatalf("provision: %v", out)
		}
		if code, body := jsonDo(t, http.MethodPatch, agentURL+"/v1/settings", "", `{"logging":{"cloudEnabled":true}}`); code != http.StatusOK {
			t.Fatalf("PATCH cloudEnabled: %d %v", code, body)
		}
		return uuid
	}
	// cloudLogs polls gently: the API's rate limit answers a tight loop
	// with 429, which only means "not yet" here.
	cloudLogs := func(uuid, query string) []any {
		code, body := jsonDo(t, http.MethodGet, apiURL+"/agents/"+uuid+"/logs"+query, access, "")
		if code == http.StatusTooManyRequests {
			time.Sleep(time.Second)
			return nil
		}
		if code != http.StatusOK {
			t.Fatalf("GET logs: %d %v", code, body)
		}
		time.Sleep(200 * time.Millisecond)
		logs, _ := body["logs"].([]any)
		return logs
	}

	// A Modbus device on a port nobody listens on: the agent warns that it
	// cannot connect.
	addDeadEndpoint := func(agentURL string) {
		t.Helper()
		if code, body := jsonDo(t, http.MethodPost, agentURL+"/v1/endpoints", "", fmt.Sprintf(`{"name":"press-7","protocol":"modbus","poll_interval":1000,
		"connection":{"host":"127.0.0.1","port":%d,"unitId":1},"data_points":[{"name":"r0","register":"holding:0"}]}`, coretest.FreePort(t))); code != http.StatusCreated {
			t.Fatalf("endpoint: %d %v", code, body)
		}
	}
	uuid := provision(agentURL)
	addDeadEndpoint(agentURL)
	warned := time.Now()
	q := "?level=warn&q=" + url.QueryEscape("endpoint connect failed")
	coretest.Eventually(t, 10*time.Second, "the agent's warn line in the cloud", func() bool { return len(cloudLogs(uuid, q)) > 0 })
	var found []any
	coretest.Eventually(t, 10*time.Second, "the warn line again", func() bool { found = cloudLogs(uuid, q); return len(found) > 0 })
	line := found[0].(map[string]any)
	if line["level"] != "warn" || !strings.Contains(line["message"].(string), "endpoint connect failed") {
		t.Fatalf("cloud log line %v", line)
	}
	t.Logf("warn line in the cloud %s after the endpoint was created", time.Since(warned).Round(10*time.Millisecond))

	// The standalone agent ships to the same cloud.
	sPort := coretest.FreePort(t)
	sURL := fmt.Sprintf("http://127.0.0.1:%d", sPort)
	sctx, scancel := context.WithCancel(context.Background())
	sexit := make(chan int, 1)
	var serr syncBuffer
	go func() {
		sexit <- execute(sctx, []string{"agent", "--data-dir", filepath.Join(t.TempDir(), "agent"), "--port", strconv.Itoa(sPort), "--log-format", "json"}, io.Discard, &serr)
	}()
	t.Cleanup(func() {
		scancel()
		select {
		case <-sexit:
		case <-time.After(20 * time.Second):
			t.Error("agent did not stop")
		}
	})
	coretest.Eventually(t, 20*time.Second, "the standalone agent ready", func() bool {
		code, _, err := get(sURL + "/v1/readiness")
		return err == nil && code == http.StatusOK
	})
	sUUID := provision(sURL)
	addDeadEndpoint(sURL)
	coretest.Eventually(t, 30*time.Second, "the standalone agent's lines in the cloud", func() bool { return len(cloudLogs(sUUID, q)) > 0 })

	// The cloud stops; every API request of the agent now logs a debug
	// line, 12000 of them for a buffer of 10000.
	stopCloud()
	if code, _ := jsonDo(t, http.MethodPatch, sURL+"/v1/settings", "", `{"logging":{"level":"debug"}}`); code != http.StatusOK {
		t.Fatal("PATCH level debug")
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	for i := 0; i < 12000; i++ {
		resp, err := client.Get(sURL + "/v1/health")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	var status map[string]any
	coretest.Eventually(t, 30*time.Second, "lines dropped and the breaker open", func() bool {
		_, status = jsonDo(t, http.MethodGet, sURL+"/v1/buffer/status", "", "")
		dropped, _ := status["agentLogDroppedTotal"].(float64)
		return dropped >= 2000 && status["agentLogCircuitOpen"] == true
	})
	if status["agentLogBufferEnabled"] != true || status["agentLogBufferLogs"].(float64) > 10000 || status["agentLogBufferBytes"].(float64) > 4<<20 ||
		status["agentLogPendingBatches"].(float64) < 1 {
		t.Fatalf("buffer status with the cloud down: %v", status)
	}
	code, metrics, err := get(sURL + "/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("agent metrics: %d %v", code, err)
	}
	var overflow float64
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, `edgeplat_agent_log_lines_dropped_total{reason="overflow"}`) {
			overflow, _ = strconv.ParseFloat(strings.Fields(l)[1], 64)
		}
	}
	// Read after the status, and every request logs: the counter is at
	// least the status's figure.
	if overflow < status["agentLogDroppedTotal"].(float64) {
		t.Fatalf("edgeplat_agent_log_lines_dropped_total{reason=overflow} = %v, status %v", overflow, status["agentLogDroppedTotal"])
	}
	t.Logf("cloud down: %v lines held, %v dropped, breaker open", status["agentLogBufferLogs"], status["agentLogDroppedTotal"])
}
