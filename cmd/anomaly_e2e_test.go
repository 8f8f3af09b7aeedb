package cmd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// anomalyStats is the part of GET /v1/anomaly/stats the test reads.
type anomalyStats struct {
	Stats struct {
		TotalDataPoints int64 `json:"totalDataPoints"`
	} `json:"stats"`
	Scores map[string]float64 `json:"scores"`
}

func getInto(t *testing.T, url string, v any) bool {
	t.Helper()
	code, body, err := get(url)
	if err != nil || code != http.StatusOK {
		return false
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
	return true
}

// spindleSamples is the sample_count of the spindle baselines the agent
// serves (one per hour slot seen), summed.
func spindleSamples(t *testing.T, url string) int64 {
	t.Helper()
	var b struct {
		Baselines []struct {
			SampleCount int64 `json:"sample_count"`
		} `json:"baselines"`
	}
	if !getInto(t, url+"/v1/anomaly/baselines?metric=spindle", &b) {
		return -1
	}
	var n int64
	for _, x := range b.Baselines {
		n += x.SampleCount
	}
	return n
}

// TestAnomalyBaselinesSurviveAgentKillIntegration: the edgeplat agent
// binary polls the pymodbus simulator with anomaly detection on (its
// default); once the warm-up is over and the baselines are saved, SIGKILL
// and a restart keep them: the persisted sample_count is served again,
// and the restarted agent scores the very first readings instead of
// warming up for 20 batches again.
func TestAnomalyBaselinesSurviveAgentKillIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary and runs a Modbus server")
	}
	clearEnv(t)
	mbPort := coretest.FreePort(t)
	coretest.Pymodbus(t, pymodbusScript, mbPort, "--units", "1", "--registers", "10")
	agent, url, ready := startAgentBinary(t)
	// Two data points polled every 250 ms: a warm-up of 20 batches takes
	// 5 s and 40 readings.
	postJSON(t, url+"/v1/endpoints", "", fmt.Sprintf(`{"name":"press-1","protocol":"modbus","enabled":true,"poll_interval":250,
	 "connection":{"host":"127.0.0.1","port":%d,"unitId":1,"timeoutMs":1000},
	 "data_points":[{"name":"spindle","register":"holding:0","type":"uint16"},{"name":"oil_temp","register":"holding:1","type":"uint16"}]}`, mbPort), http.StatusCreated)
	coretest.Eventually(t, 60*time.Second, "spindle to be scored after the warm-up", func() bool {
		var st anomalyStats
		return getInto(t, url+"/v1/anomaly/stats", &st) && hasKey(st.Scores, "spindle")
	})
	postJSON(t, url+"/v1/anomaly/save-baselines", "", "", http.StatusOK)
	saved := spindleSamples(t, url)
	if saved < 20 {
		t.Fatalf("spindle baselines hold %d samples after the warm-up, want at least 20", saved)
	}

	agent.kill()
	agent.start()
	ready()
	if got := spindleSamples(t, url); got < saved {
		t.Fatalf("after SIGKILL and a restart the spindle baselines hold %d samples, want the %d saved", got, saved)
	}
	// The first scores come while far fewer readings have arrived than a
	// new warm-up needs.
	var first anomalyStats
	coretest.Eventually(t, 30*time.Second, "spindle scored after the restart", func() bool {
		return getInto(t, url+"/v1/anomaly/stats", &first) && hasKey(first.Scores, "spindle")
	})
	if first.Stats.TotalDataPoints >= 40 {
		t.Fatalf("the restarted agent scored spindle only after %d readings: the warm-up was repeated", first.Stats.TotalDataPoints)
	}
	t.Logf("baselines: %d spindle samples saved before SIGKILL, served after the restart; spindle scored after %d readings of the new run",
		saved, first.Stats.TotalDataPoints)
}

func hasKey(m map[string]float64, k string) bool {
	_, ok := m[k]
	return ok
}

// startAgentBinary runs the edgeplat binary as a standalone agent with a
// data directory of its own and waits until it is ready; ready waits
// again, after a restart of the process.
func startAgentBinary(t *testing.T) (agent *proc, url string, ready func()) {
	t.Helper()
	bin := buildBinary(t)
	port := coretest.FreePort(t)
	url = fmt.Sprintf("http://127.0.0.1:%d", port)
	env := append(os.Environ(), "AGENT_DATA_DIR="+filepath.Join(t.TempDir(), "agent"), "DEVICE_API_PORT="+strconv.Itoa(port), "EDGEPLAT_LOG_FORMAT=json")
	agent = startProc(t, bin, "agent", env, "agent")
	ready = func() {
		t.Helper()
		coretest.Eventually(t, 60*time.Second, "the agent to be ready", func() bool {
			code, _, err := get(url + "/v1/readiness")
			return err == nil && code == http.StatusOK
		})
	}
	ready()
	return agent, url, ready
}
