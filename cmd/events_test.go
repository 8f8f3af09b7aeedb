package cmd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestEventReplayAllInOne: on all-in-one with a real agent, after three
// target-state changes the event log's compare of the first and third
// names exactly the changed fields, and a replay of the second with
// apply makes its content a new version that reaches the agent over
// MQTT (the state poll is an hour away), which applies it and reports
// running it.
func TestEventReplayAllInOne(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs all-in-one")
	}
	p, agentURL := startAllInOne(t)
	c := provisionAgent(t, p.api, agentURL)
	c.setStatePoll(t, 3600000)
	c.waitPlatformConnected(t)

	var versions []int64
	for _, level := range []string{"info", "debug", "warn"} {
		v := c.changeTargetState(t, http.MethodPut, fmt.Sprintf(`{"state":{"schemaVersion":1,"settings":{"logging":{"level":%q}}}}`, level))
		versions = append(versions, v)
		coretest.Eventually(t, 15*time.Second, fmt.Sprintf("the agent to hold version %d", v), func() bool { return c.targetVersion(t) == v })
	}

	events := c.apiURL + "/events/device/" + c.agent
	code, out := jsonDo(t, http.MethodPost, events+"/compare", c.access,
		fmt.Sprintf(`{"from":{"version":%d},"to":{"version":%d}}`, versions[0], versions[2]))
	if code != http.StatusOK {
		t.Fatalf("compare: %d %v", code, out)
	}
	want := []any{map[string]any{"path": "/settings/logging/level", "op": "changed", "from": "info", "to": "warn"}}
	if !reflect.DeepEqual(out["changes"], want) {
		t.Errorf("compare of versions %d and %d: %v, want %v", versions[0], versions[2], out["changes"], want)
	}

	start := time.Now()
	code, out = jsonDo(t, http.MethodPost, events+"/replay", c.access, fmt.Sprintf(`{"to":{"version":%d},"apply":true}`, versions[1]))
	if code != http.StatusOK {
		t.Fatalf("replay: %d %v", code, out)
	}
	applied, _ := out["applied"].(map[string]any)
	nv, _ := applied["version"].(float64)
	v4 := int64(nv)
	if v4 != versions[2]+1 {
		t.Fatalf("replay applied version %d, want %d: %v", v4, versions[2]+1, out)
	}
	coretest.Eventually(t, 15*time.Second, fmt.Sprintf("the agent to hold the replayed version %d", v4), func() bool { return c.targetVersion(t) == v4 })
	t.Logf("replayed version %d held by the agent %v after the request", v4, time.Since(start).Round(time.Millisecond))
	// The agent runs version 2's content: its logging level is debug
	// again.
	coretest.Eventually(t, 15*time.Second, "the agent's logging level to be debug", func() bool {
		code, body, err := get(agentURL + "/v1/settings")
		if err != nil || code != http.StatusOK {
			return false
		}
		var s struct {
			Settings struct {
				Logging struct {
					Level string `json:"level"`
				} `json:"logging"`
			} `json:"settings"`
		}
		return json.Unmarshal([]byte(body), &s) == nil && s.Settings.Logging.Level == "debug"
	})
	// And its state report says it runs the new version, which the event
	// log keeps as a snapshot.
	coretest.Eventually(t, 45*time.Second, fmt.Sprintf("a state report of version %d in the event log", v4), func() bool {
		code, out := jsonDo(t, http.MethodGet, events+"?kind=agent.state_report&limit=1", c.access, "")
		if code != http.StatusOK {
			return false
		}
		evs, _ := out["events"].([]any)
		if len(evs) == 0 {
			return false
		}
		d, _ := evs[0].(map[string]any)["detail"].(map[string]any)
		return d["targetVersion"] == float64(v4)
	})
}
