package cmd

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/goburrow/modbus"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestEdgeAnomalyReachesTheCloudIntegration: all-in-one's agent polls
// register r3 of the pymodbus simulator (steady at 2003) with anomaly
// detection on, its default. After the warm-up the cloud's readings of r3
// carry the agent's anomaly score and no alert is raised; a step of the
// register raises a critical alert on the agent, the cloud's reading of
// the step carries the alert's score, above its threshold, and the alert
// reaches the cloud as an event of the agent.
func TestEdgeAnomalyReachesTheCloudIntegration(t *testing.T) {
	r := startConsoleRig(t)
	agentURL := "http://127.0.0.1:" + strconv.Itoa(r.ports.agent)
	series := func() []rawScored {
		var ts struct {
			Points []rawScored `json:"points"`
		}
		q := url.Values{"metric": {"press-1.r3"}, "start": {time.Now().Add(-10 * time.Minute).UTC().Format(time.RFC3339)}}
		code, body, err := getWithToken(r.apiURL+"/readings/"+r.agent+"/timeseries?"+q.Encode(), r.access)
		if err != nil || code != http.StatusOK {
			t.Fatalf("timeseries of press-1.r3: %d %v %s", code, err, body)
		}
		if err := json.Unmarshal([]byte(body), &ts); err != nil {
			t.Fatal(err)
		}
		return ts.Points
	}
	coretest.Eventually(t, 60*time.Second, "the cloud's readings of r3 to carry a score after the warm-up", func() bool {
		for _, p := range series() {
			if p.AnomalyScore != nil {
				return true
			}
		}
		return false
	})
	var alerts struct {
		Alerts []struct {
			Metric       string  `json:"metric"`
			Severity     string  `json:"severity"`
			Timestamp    int64   `json:"timestamp"`
			Threshold    float64 `json:"threshold"`
			AnomalyScore float64 `json:"anomaly_score"`
		} `json:"alerts"`
	}
	if !getInto(t, agentURL+"/v1/anomaly/alerts?metric=r3", &alerts) || len(alerts.Alerts) != 0 {
		t.Fatalf("the steady register raised alerts: %+v", alerts.Alerts)
	}

	h := modbus.NewTCPClientHandler("127.0.0.1:" + strconv.Itoa(r.modbusPort))
	h.SlaveId = 2
	h.Timeout = 2 * time.Second
	if err := h.Connect(); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := modbus.NewClient(h).WriteSingleRegister(3, 9003); err != nil {
		t.Fatalf("write holding 3: %v", err)
	}
	coretest.Eventually(t, 30*time.Second, "a critical alert for r3 on the agent", func() bool {
		return getInto(t, agentURL+"/v1/anomaly/alerts?metric=r3&severity=critical", &alerts) && len(alerts.Alerts) > 0
	})
	alert := alerts.Alerts[len(alerts.Alerts)-1] // the oldest: the step itself
	if alert.AnomalyScore <= alert.Threshold {
		t.Fatalf("alert score %v not above its threshold %v", alert.AnomalyScore, alert.Threshold)
	}
	coretest.Eventually(t, 30*time.Second, "the step's reading in the cloud with the alert's score", func() bool {
		for _, p := range series() {
			if p.Value != nil && *p.Value == 9003 && p.AnomalyScore != nil && *p.AnomalyScore > alert.Threshold {
				return true
			}
		}
		return false
	})
	coretest.Eventually(t, 30*time.Second, "the alert as an event of the agent in the cloud", func() bool {
		code, body, err := getWithToken(r.apiURL+"/agents/"+r.agent+"/events?kind=anomaly_alert", r.access)
		if err != nil || code != http.StatusOK {
			return false
		}
		var ev struct {
			Events []struct {
				Severity string `json:"severity"`
			} `json:"events"`
		}
		if err := json.Unmarshal([]byte(body), &ev); err != nil {
			t.Fatalf("events: %v in %s", err, body)
		}
		for _, e := range ev.Events {
			if e.Severity == "critical" {
				return true
			}
		}
		return false
	})
	t.Logf("step 2003 -> 9003: critical alert, score %.3f over threshold %.3f, kept with the cloud's reading and stored as an agent event",
		alert.AnomalyScore, alert.Threshold)
}

// rawScored is a raw point of /readings/:agent_uuid/timeseries.
type rawScored struct {
	Value        *float64 `json:"value"`
	AnomalyScore *float64 `json:"anomalyScore"`
}
