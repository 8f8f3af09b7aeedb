package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/cloud"
	"github.com/edgeplat/edgeplat/roles/agent/jobs/jobstest"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
)

// provisionForJobs makes the running agent provisioned against api and
// broker, as provisioning leaves it: credentials stored, the platform
// destination connected with the command subtree subscribed.
func provisionForJobs(t *testing.T, r *running, api *jobstest.API, brokerURL, prefix, key string) {
	t.Helper()
	ctx := context.Background()
	st := r.agent.p.st.Load()
	cr := cloud.Credentials{APIEndpoint: api.URL(), AgentUUID: r.agent.p.id.Load().UUID, APIKey: key,
		MQTT: cloud.MQTT{BrokerURL: brokerURL, ClientID: "agent-jobs-test", TopicPrefix: prefix}}
	doc, err := json.Marshal(cr)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetMeta(ctx, metaCredentials, string(doc)); err != nil {
		t.Fatal(err)
	}
	if err := st.SetMeta(ctx, metaProvisioned, "true"); err != nil {
		t.Fatal(err)
	}
	if code, body := r.do("POST", "/v1/publish/destinations", `{"name":"cloud","type":"platform"}`, nil); code != 201 {
		t.Fatalf("platform destination: %d %s", code, body)
	}
	if err := r.agent.p.pub.SetCredentials(t.Context(), dest.PlatformCredentials{BrokerURL: brokerURL, ClientID: "agent-jobs-test", TopicPrefix: prefix}, ""); err != nil {
		t.Fatal(err)
	}
}

// TestJobsShellSetting: a shell job delivered twice over MQTT and once
// more by the poll (intervals.jobPollMs) runs once when agent.jobs_shell
// (EDGEPLAT_AGENT_JOBS_SHELL) is true, and ends failed shell_disabled
// when it is false; GET /v1/jobs lists it.
func TestJobsShellSetting(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs agents against an embedded broker")
	}
	tests := []struct {
		shell  bool
		status control.ExecStatus
		reason string
		result string
	}{
		{true, control.ExecSucceeded, "", "42\n"},
		{false, control.ExecFailed, control.ReasonShellDisabled, "agent.jobs_shell"},
	}
	for _, tt := range tests {
		t.Run(map[bool]string{true: "enabled", false: "disabled"}[tt.shell], func(t *testing.T) {
			broker := startEmbeddedBroker(t)
			r := startAgent(t, t.TempDir(), true, func(a *config.Agent) { a.JobsShell = tt.shell })
			prefix := control.Prefix(codec.NewUUID(), codec.NewUUID())
			const key = "device-key-of-the-jobs-test"
			api := jobstest.New(t, r.agent.p.id.Load().UUID, key)
			if code, body := r.do("PATCH", "/v1/settings", `{"intervals":{"jobPollMs":1000}}`, nil); code != 200 || !strings.Contains(body, `"jobPollMs":1000`) {
				t.Fatalf("PATCH jobPollMs: %d %s", code, body)
			}
			provisionForJobs(t, r, api, broker.url(), prefix, key)
			eventually(t, 10*time.Second, "the platform connection", r.agent.p.pub.PlatformConnected)
			// Connected comes before the broker has the subscription.
			eventually(t, 10*time.Second, "the command subscription", func() bool {
				return len(broker.s.Topics.Subscribers(control.CommandTopic(prefix, control.CmdJob)).Subscriptions) > 0
			})

			d := api.Add(control.HandlerShell, `{"command":"sleep 2; echo $((6*7))"}`, 30)
			payload, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			c := paho.NewClient(paho.NewClientOptions().AddBroker(broker.url()).SetClientID("jobs-cloud"))
			if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
				t.Fatalf("cloud client: %v", tok.Error())
			}
			defer c.Disconnect(100)
			for range 2 {
				if tok := c.Publish(control.CommandTopic(prefix, control.CmdJob), 1, false, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
					t.Fatalf("publish: %v", tok.Error())
				}
			}
			var u control.JobStatusUpdate
			eventually(t, 15*time.Second, "the final status", func() bool {
				var ok bool
				u, ok = api.Final(d.JobID)
				return ok
			})
			if u.Status != tt.status || u.StatusReason != tt.reason || !strings.Contains(u.Result, tt.result) {
				t.Fatalf("final %+v", u)
			}
			// Both MQTT copies reached the agent, and so did the poll's
			// answers while the command ran (it takes two poll
			// intervals); one ran.
			want := 1.0
			if tt.shell {
				want = 1 + float64(api.NextServed())
				if want < 2 {
					t.Fatalf("the poll answered %v times while the job ran", want-1)
				}
			}
			eventually(t, 10*time.Second, "the duplicates counted", func() bool {
				return coretest.MetricValue(t, r.metrics, "edgeplat_agent_job_duplicates_total", nil) >= want
			})
			if n := coretest.MetricValue(t, r.metrics, "edgeplat_agent_job_runs_total", map[string]string{"handler": "shell", "status": string(tt.status)}); n != 1 {
				t.Fatalf("runs %v", n)
			}
			code, body := r.do("GET", "/v1/jobs?limit=5", "", nil)
			var list struct {
				Jobs []struct {
					JobID, Handler, State, Status string
				} `json:"jobs"`
			}
			if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list.Jobs) != 1 ||
				list.Jobs[0].JobID != d.JobID || list.Jobs[0].Status != string(tt.status) || list.Jobs[0].State != "ended" {
				t.Fatalf("GET /v1/jobs: %d %s", code, body)
			}
			if code, body := r.do("GET", "/v1/jobs?limit=0", "", nil); code != 400 || !strings.Contains(errorOf(t, body), "limit") {
				t.Fatalf("limit 0: %d %s", code, body)
			}
		})
	}
}
