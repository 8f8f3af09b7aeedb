package cmd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestAllInOneSimulateFaultReachesTheCloud: `all-in-one --simulate=fault`
// turns simulation mode on and starts the fault scenario with no Modbus
// server anywhere. Once the agent is provisioned, a fresh start of the
// scenario puts BAD readings of its device in the cloud (within 5 s on an
// idle machine; the time it took is logged), and every cloud reading of the device carries
// protocol "simulated".
func TestAllInOneSimulateFaultReachesTheCloud(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs all-in-one")
	}
	clearEnv(t)
	const email, password = "ops@example.com", "correct horse battery"
	t.Setenv("EDGEPLAT_ADMIN_EMAIL", email)
	t.Setenv("EDGEPLAT_ADMIN_PASSWORD", password)
	p := freeAIOPorts(t)
	aio := startAIO(t, append(p.args(filepath.Join(t.TempDir(), "data")), "--auto-provision=true", "--simulate=fault"))
	agentURL := fmt.Sprintf("http://127.0.0.1:%d", p.agent)
	api := fmt.Sprintf("http://127.0.0.1:%d/api/v1", p.api)
	var agentUUID string
	coretest.Eventually(t, 60*time.Second, "all-in-one to provision its agent", func() bool {
		st := provisionStatusOf(agentURL)
		agentUUID, _ = st["uuid"].(string)
		return st["provisioned"] == true
	})
	cloudSide{agentURL: agentURL}.waitPlatformConnected(t)
	login := postJSON(t, api+"/auth/login", "", fmt.Sprintf(`{"email":%q,"password":%q}`, email, password), http.StatusOK)
	token, _ := login["accessToken"].(string)

	code, body, err := get(agentURL + "/v1/simulation/status")
	if err != nil || code != http.StatusOK || !strings.Contains(body, `"name":"fault","description"`) ||
		!strings.Contains(body, `"devices":[{"name":"sim-fault-1"`) {
		t.Fatalf("the flag did not start the fault scenario: %d %v %s", code, err, body)
	}

	// Measured from a start made once the agent publishes to the cloud,
	// so the figure is the pipeline's and not provisioning's.
	postJSON(t, agentURL+"/v1/simulation/scenarios/fault/stop", "", "", http.StatusOK)
	started := time.Now()
	postJSON(t, agentURL+"/v1/simulation/scenarios/fault/start", "", "", http.StatusOK)
	var bad string
	// The target is 5 s (docs/simulation.md); the time is logged, not
	// asserted, so that a loaded runner does not fail the test on it.
	coretest.Eventually(t, 60*time.Second, "a BAD reading of sim-fault-1 in the cloud", func() bool {
		for _, metric := range []string{"sim-fault-1.temperature", "sim-fault-1.pressure"} {
			for _, pt := range cloudPoints(t, api, token, agentUUID, metric, started) {
				if pt.Quality == "BAD" && pt.Value == nil && pt.Time.After(started) {
					bad = metric + " at " + pt.Time.Format(time.RFC3339Nano)
					return true
				}
			}
		}
		return false
	})
	took := time.Since(started)
	t.Logf("fault scenario started at %s -> BAD reading in the cloud (%s) in %v", started.UTC().Format(time.RFC3339Nano), bad, took.Round(time.Millisecond))

	q := url.Values{"agent_uuid": {agentUUID}}
	code, body, err = getWithToken(api+"/readings/latest?"+q.Encode(), token)
	if err != nil || code != http.StatusOK {
		t.Fatalf("latest readings: %d %v %s", code, err, body)
	}
	var latest struct {
		Readings []struct {
			MetricName string `json:"metricName"`
			DeviceName string `json:"deviceName"`
			Protocol   string `json:"protocol"`
		} `json:"readings"`
	}
	if err := json.Unmarshal([]byte(body), &latest); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range latest.Readings {
		if r.DeviceName == "sim-fault-1" {
			n++
			if r.Protocol != "simulated" {
				t.Errorf("cloud reading %s has protocol %q, want simulated", r.MetricName, r.Protocol)
			}
		}
	}
	if n != 2 {
		t.Errorf("the cloud has %d metrics of sim-fault-1, want 2: %s", n, body)
	}
	aio.stop()
}

// cloudPoint is a raw point of /readings/:agent_uuid/timeseries.
type cloudPoint struct {
	Time    time.Time `json:"time"`
	Value   *float64  `json:"value"`
	Quality string    `json:"quality"`
}

// cloudPoints reads the raw points of one metric since a second before
// since.
func cloudPoints(t *testing.T, api, token, agent, metric string, since time.Time) []cloudPoint {
	t.Helper()
	q := url.Values{"metric": {metric}, "start": {since.Add(-time.Second).UTC().Format(time.RFC3339)}}
	code, body, err := getWithToken(api+"/readings/"+agent+"/timeseries?"+q.Encode(), token)
	if err != nil || code != http.StatusOK {
		return nil // not stored yet: the metric is unknown
	}
	var ts struct {
		Points []cloudPoint `json:"points"`
	}
	if err := json.Unmarshal([]byte(body), &ts); err != nil {
		t.Fatalf("timeseries of %s: %v in %s", metric, err, body)
	}
	return ts.Points
}
