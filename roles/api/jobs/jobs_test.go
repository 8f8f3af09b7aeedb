package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
)

func TestTemplatesIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		body := map[string]any{"name": "restart", "handler": "restart-endpoint", "params": map[string]any{"endpoint": "{{ep}}"},
			"parameters": []map[string]any{{"name": "ep", "required": true}}, "timeoutSeconds": 120}
		h.call("POST", "/jobs/templates", "member-a", body).ExpectError(t, 403, "forbidden")
		r := h.call("POST", "/jobs/templates", "admin-a", body).Expect(t, "create", 201)
		id := r.Str("id")
		h.call("POST", "/jobs/templates", "admin-a", body).ExpectError(t, 409, "conflict")
		for name, bad := range map[string]map[string]any{
			"handler":     {"name": "x", "handler": "format-disk"},
			"placeholder": {"name": "y", "handler": "shell", "params": map[string]any{"command": "{{cmd}}"}},
			"params":      {"name": "z", "handler": "sync", "params": []int{1}},
			"timeout":     {"name": "w", "handler": "sync", "timeoutSeconds": 90000},
		} {
			r := h.call("POST", "/jobs/templates", "admin-a", bad)
			r.ExpectError(t, 422, "validation_failed")
			if !strings.Contains(r.Raw, name) {
				t.Errorf("%s: %s does not name the field", name, r.Raw)
			}
		}
		h.call("GET", "/jobs/templates/"+id, "member-a", nil).Expect(t, "member reads", 200)
		h.call("GET", "/jobs/templates/"+id, "admin-b", nil).ExpectError(t, 404, "not_found")
		h.call("PUT", "/jobs/templates/"+id, "admin-b", body).ExpectError(t, 404, "not_found")
		h.call("DELETE", "/jobs/templates/"+id, "admin-b", nil).ExpectError(t, 404, "not_found")
		h.call("PUT", "/jobs/templates/"+id, "member-a", body).ExpectError(t, 403, "forbidden")
		body["description"] = "restart one endpoint"
		if got := h.call("PUT", "/jobs/templates/"+id, "admin-a", body).Expect(t, "put", 200).Str("description"); got != "restart one endpoint" {
			t.Errorf("description after PUT = %q", got)
		}
		if l := h.call("GET", "/jobs/templates", "admin-b", nil).Expect(t, "list b", 200).List("templates"); len(l) != 0 {
			t.Errorf("tenant B sees %d templates", len(l))
		}
		if l := h.call("GET", "/jobs/templates", "member-a", nil).Expect(t, "list a", 200).List("templates"); len(l) != 1 {
			t.Errorf("tenant A sees %d templates", len(l))
		}
		h.call("DELETE", "/jobs/templates/"+id, "member-a", nil).ExpectError(t, 403, "forbidden")
		if r := h.call("DELETE", "/jobs/templates/"+id, "admin-a", nil); r.Status != 204 {
			t.Fatalf("delete: %d %s", r.Status, r.Raw)
		}
		h.call("GET", "/jobs/templates/"+id, "admin-a", nil).ExpectError(t, 404, "not_found")
		if got := h.audit.Kinds(); !slices.Equal(got, []string{AuditTemplateCreated, AuditTemplateDeleted, AuditTemplateUpdated}) {
			t.Errorf("audit kinds %v", got)
		}
	})
}

func TestDispatchIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		tmpl := h.call("POST", "/jobs/templates", "admin-a", map[string]any{"name": "write", "handler": "write-register",
			"params":     map[string]any{"endpoint": "plc-{{line}}", "register": "{{reg}}", "value": "{{value}}"},
			"parameters": []map[string]any{{"name": "line", "required": true}, {"name": "reg", "default": 40001}, {"name": "value", "required": true}},
		}).Expect(t, "template", 201).Str("id")
		agents := map[string]any{"agents": []string{apitest.AgentA1, apitest.AgentA2}}
		for _, tc := range []struct {
			name, who string
			body      map[string]any
			status    int
			code, msg string
		}{
			{"member", "member-a", map[string]any{"handler": "sync", "targets": agents}, 403, "forbidden", ""},
			{"missing parameter", "admin-a", map[string]any{"templateId": tmpl, "parameters": map[string]any{"line": 3}, "targets": agents}, 422, "validation_failed", "parameters.value"},
			{"unknown parameter", "admin-a", map[string]any{"templateId": tmpl, "parameters": map[string]any{"line": 3, "value": 1, "speed": 2}, "targets": agents}, 422, "validation_failed", "parameters.speed"},
			{"other tenant's template", "admin-b", map[string]any{"templateId": tmpl, "targets": map[string]any{"agents": []string{apitest.AgentB1}}}, 404, "not_found", tmpl},
			{"template and handler", "admin-a", map[string]any{"templateId": tmpl, "handler": "sync", "targets": agents}, 422, "validation_failed", "templateId"},
			{"unknown handler", "admin-a", map[string]any{"handler": "format", "targets": agents}, 422, "validation_failed", "handler"},
			{"handler params", "admin-a", map[string]any{"handler": "shell", "targets": agents}, 422, "validation_failed", "params.command"},
			{"restart-app without appId", "admin-a", map[string]any{"handler": "restart-app", "params": map[string]any{"appName": "web"}, "targets": agents}, 422, "validation_failed", "params.appId"},
			{"other tenant's agent", "admin-a", map[string]any{"handler": "sync", "targets": map[string]any{"agents": []string{apitest.AgentA1, apitest.AgentB1}}}, 404, "not_found", apitest.AgentB1},
			{"bad agent id", "admin-a", map[string]any{"handler": "sync", "targets": map[string]any{"agents": []string{"x"}}}, 422, "validation_failed", "targets.agents[0]"},
			{"no targets", "admin-a", map[string]any{"handler": "sync"}, 422, "validation_failed", "targets"},
			{"two targets", "admin-a", map[string]any{"handler": "sync", "targets": map[string]any{"fleet": "north", "tagQuery": map[string]any{"line": "3"}}}, 422, "validation_failed", "exactly one"},
			{"unknown fleet", "admin-a", map[string]any{"handler": "sync", "targets": map[string]any{"fleet": "south"}}, 404, "not_found", "south"},
			{"empty fleet", "admin-a", map[string]any{"handler": "sync", "targets": map[string]any{"fleet": "empty"}}, 422, "validation_failed", "no agent"},
			{"query matching nothing", "admin-a", map[string]any{"handler": "sync", "targets": map[string]any{"tagQuery": map[string]any{"line": "9"}}}, 422, "validation_failed", "no agent"},
			{"bad query", "admin-a", map[string]any{"handler": "sync", "targets": map[string]any{"tagQuery": map[string]any{"line": 5}}}, 422, "validation_failed", "tagQuery"},
			{"abort percent", "admin-a", map[string]any{"handler": "sync", "targets": agents, "abort": map[string]any{"failedPercent": 101}}, 422, "validation_failed", "abort.failedPercent"},
			{"rollout", "admin-a", map[string]any{"handler": "sync", "targets": agents, "rollout": map[string]any{"agentsPerMinute": -1}}, 422, "validation_failed", "rollout"},
			{"unknown field", "admin-a", map[string]any{"handler": "sync", "targets": agents, "speed": 1}, 400, "invalid_body", "speed"},
		} {
			r := h.call("POST", "/jobs/execute", tc.who, tc.body)
			r.ExpectError(t, tc.status, tc.code)
			if !strings.Contains(r.Raw, tc.msg) {
				t.Errorf("%s: %s does not say %q", tc.name, r.Raw, tc.msg)
			}
		}
		if got := h.pub.take(); got != nil {
			t.Fatalf("refused dispatches sent %v", got)
		}

		r := h.call("POST", "/jobs/execute", "admin-a", map[string]any{"templateId": tmpl, "parameters": map[string]any{"line": 3, "value": 7},
			"targets": map[string]any{"agents": []string{apitest.AgentA2, apitest.AgentA1, apitest.AgentA2}}}).Expect(t, "dispatch", 201)
		var job Job
		if err := json.Unmarshal([]byte(r.Raw), &job); err != nil {
			t.Fatal(err)
		}
		if job.Total != 2 || job.Counts["queued"] != 2 || job.Status != JobInProgress || job.TemplateID == nil || *job.TemplateID != tmpl ||
			canon(job.Params) != `{"endpoint":"plc-3","register":40001,"value":7}` || job.Abort.MinExecuted != 1 {
			t.Errorf("job = %s", r.Raw)
		}
		if got := h.pub.take(); !slices.Equal(got, []string{"job " + apitest.AgentA1, "job " + apitest.AgentA2}) {
			t.Errorf("sent %v, want a CmdJob to each agent at once", got)
		}

		for target, want := range map[string][]string{"fleet": {apitest.AgentA1, apitest.AgentA2}, "tagQuery": {apitest.AgentA2, apitest.AgentA3}} {
			value := map[string]any{"fleet": "north", "tagQuery": map[string]any{"line": "3"}}[target]
			id := h.dispatch(map[string]any{"handler": "sync", "targets": map[string]any{target: value}})
			got := h.pub.take()
			if len(got) != 2 || got[0] != "job "+want[0] || got[1] != "job "+want[1] {
				t.Errorf("%s: sent %v", target, got)
			}
			if tg := h.call("GET", "/jobs/executions/"+id, "admin-a", nil).Body["targets"].(map[string]any); fmt.Sprint(tg[target]) != fmt.Sprint(value) {
				t.Errorf("%s: targets %v", target, tg)
			}
		}

		one := h.call("POST", "/agents/"+apitest.AgentA3+"/jobs", "admin-a", map[string]any{"handler": "collect-diagnostics", "timeoutSeconds": 60}).
			Expect(t, "dispatch to one agent", 201)
		if one.Body["total"].(float64) != 1 || one.Body["timeoutSeconds"].(float64) != 60 {
			t.Errorf("one-agent job = %s", one.Raw)
		}
		h.call("POST", "/agents/"+apitest.AgentB1+"/jobs", "admin-a", map[string]any{"handler": "sync"}).ExpectError(t, 404, "not_found")
		h.call("POST", "/agents/"+apitest.AgentA3+"/jobs", "member-a", map[string]any{"handler": "sync"}).ExpectError(t, 403, "forbidden")
		h.call("POST", "/agents/"+apitest.AgentA3+"/jobs", "admin-a", map[string]any{"handler": "sync", "targets": agents}).ExpectError(t, 422, "validation_failed")
		if got := h.audit.Kinds(); len(got) != 5 || got[1] != AuditJobCreated {
			t.Errorf("audit kinds %v", got)
		}
	})
}

func TestRolloutIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		id := h.dispatch(map[string]any{"handler": "sync", "targets": map[string]any{"agents": []string{apitest.AgentA1, apitest.AgentA2, apitest.AgentA3}},
			"rollout": map[string]any{"agentsPerMinute": 2}})
		if got := h.pub.take(); !slices.Equal(got, []string{"job " + apitest.AgentA1}) {
			t.Fatalf("at dispatch sent %v, want the first agent only", got)
		}
		h.agentCall("GET", "/agents/"+apitest.AgentA2+"/jobs/next", apitest.AgentA2, nil).Expect(t, "unreleased is not next", 204)
		h.agentCall("PATCH", "/agents/"+apitest.AgentA2+"/jobs/"+id+"/status", apitest.AgentA2, map[string]any{"status": "in_progress"}).ExpectError(t, 404, "not_found")
		h.clock.Add(29 * time.Second)
		h.pass()
		if got := h.pub.take(); got != nil {
			t.Fatalf("before 30 s sent %v", got)
		}
		h.clock.Add(time.Second)
		h.pass()
		h.pass()
		if got := h.pub.take(); !slices.Equal(got, []string{"job " + apitest.AgentA2}) {
			t.Fatalf("at 30 s sent %v, want the second agent once", got)
		}
		h.clock.Add(30 * time.Second)
		h.pass()
		if got := h.pub.take(); !slices.Equal(got, []string{"job " + apitest.AgentA3}) {
			t.Fatalf("at 60 s sent %v, want the third agent", got)
		}
		h.clock.Add(time.Hour)
		h.pass()
		if got := h.pub.take(); got != nil {
			t.Fatalf("after all were released sent %v", got)
		}
	})
}

// finish reports in_progress then status for agent's execution.
func (h *harness) finish(job, agent, status string) {
	h.t.Helper()
	path := "/agents/" + agent + "/jobs/" + job + "/status"
	h.agentCall("PATCH", path, agent, map[string]any{"status": "in_progress"}).Expect(h.t, "start", 200)
	h.agentCall("PATCH", path, agent, map[string]any{"status": status}).Expect(h.t, status, 200)
}

func TestAbortIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		three := map[string]any{"agents": []string{apitest.AgentA1, apitest.AgentA2, apitest.AgentA3}}
		rule := map[string]any{"failedPercent": 50, "minExecuted": 2}
		// One failure in two finished is 50 %, not more: the job goes on.
		id := h.dispatch(map[string]any{"handler": "sync", "targets": three, "abort": rule})
		h.pub.take()
		h.finish(id, apitest.AgentA1, "failed")
		h.pass()
		h.finish(id, apitest.AgentA2, "succeeded")
		h.pass()
		if s := h.jobStatus(id); s != JobInProgress {
			t.Fatalf("at 50 %% the job is %s", s)
		}

		id = h.dispatch(map[string]any{"handler": "sync", "targets": three, "abort": rule, "rollout": map[string]any{"agentsPerMinute": 1}})
		h.clock.Add(time.Minute)
		h.pass()
		h.pub.take()
		h.finish(id, apitest.AgentA1, "failed")
		h.pass()
		if s := h.jobStatus(id); s != JobInProgress {
			t.Fatalf("under minExecuted the job is %s", s)
		}
		h.finish(id, apitest.AgentA2, "failed")
		h.audit.Kinds()
		h.pass()
		if s := h.jobStatus(id); s != JobAborted {
			t.Fatalf("at 100 %% of 2 the job is %s", s)
		}
		if s, why := h.status(id, apitest.AgentA3); s != "cancelled" || why != control.ReasonJobAborted {
			t.Errorf("the third execution is %s (%s)", s, why)
		}
		if got := h.pub.take(); got != nil {
			t.Errorf("abort sent %v; the third was never released", got)
		}
		if got := h.audit.Kinds(); !slices.Equal(got, []string{AuditJobAborted}) {
			t.Errorf("audit kinds %v", got)
		}
		h.clock.Add(time.Hour)
		h.pass()
		if got := h.pub.take(); got != nil {
			t.Errorf("an aborted job released %v", got)
		}
	})
}

func TestTimeoutIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		id := h.dispatch(map[string]any{"handler": "sync", "timeoutSeconds": 60, "targets": map[string]any{"agents": []string{apitest.AgentA1}}})
		h.pub.take()
		path := "/agents/" + apitest.AgentA1 + "/jobs/" + id + "/status"
		h.agentCall("PATCH", path, apitest.AgentA1, map[string]any{"status": "in_progress"}).Expect(t, "start", 200)
		h.clock.Add(60*time.Second + TimeoutGrace)
		h.pass()
		if s, _ := h.status(id, apitest.AgentA1); s != "in_progress" {
			t.Fatalf("at the deadline the execution is %s", s)
		}
		h.clock.Add(time.Second)
		h.pass()
		if s, why := h.status(id, apitest.AgentA1); s != "timed_out" || why != control.ReasonTimeout {
			t.Fatalf("past the deadline the execution is %s (%s)", s, why)
		}
		if got := h.pub.take(); !slices.Equal(got, []string{"job-cancel " + apitest.AgentA1}) {
			t.Errorf("timeout sent %v", got)
		}
		r := h.agentCall("PATCH", path, apitest.AgentA1, map[string]any{"status": "succeeded"})
		r.ExpectError(t, 409, control.CodeExecutionEnded)
		if !strings.Contains(r.Raw, `"status":"timed_out"`) {
			t.Errorf("409 does not name the status: %s", r.Raw)
		}
		if s := h.jobStatus(id); s != JobCompleted {
			t.Errorf("job is %s, want completed", s)
		}
	})
}

func TestCancelIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		id := h.dispatch(map[string]any{"handler": "sync", "targets": map[string]any{"agents": []string{apitest.AgentA1, apitest.AgentA2}},
			"rollout": map[string]any{"agentsPerMinute": 1}})
		h.pub.take()
		h.agentCall("PATCH", "/agents/"+apitest.AgentA1+"/jobs/"+id+"/status", apitest.AgentA1, map[string]any{"status": "in_progress"}).Expect(t, "start", 200)
		h.call("POST", "/jobs/executions/"+id+"/cancel", "member-a", nil).ExpectError(t, 403, "forbidden")
		h.call("POST", "/jobs/executions/"+id+"/cancel", "admin-b", nil).ExpectError(t, 404, "not_found")
		r := h.call("POST", "/jobs/executions/"+id+"/cancel", "admin-a", nil).Expect(t, "cancel job", 200)
		if r.Str("status") != JobCancelled || r.Body["counts"].(map[string]any)["cancelled"].(float64) != 2 {
			t.Errorf("cancelled job = %s", r.Raw)
		}
		if got := h.pub.take(); !slices.Equal(got, []string{"job-cancel " + apitest.AgentA1}) {
			t.Errorf("cancel sent %v, want one to the released agent", got)
		}
		h.call("POST", "/jobs/executions/"+id+"/cancel", "admin-a", nil).ExpectError(t, 409, "conflict")
		h.agentCall("PATCH", "/agents/"+apitest.AgentA1+"/jobs/"+id+"/status", apitest.AgentA1, map[string]any{"status": "succeeded"}).
			ExpectError(t, 409, control.CodeExecutionEnded)
		h.clock.Add(time.Hour)
		h.pass()
		if got := h.pub.take(); got != nil {
			t.Errorf("a cancelled job released %v", got)
		}

		id = h.dispatch(map[string]any{"handler": "sync", "targets": map[string]any{"agents": []string{apitest.AgentA1, apitest.AgentA2}}})
		h.pub.take()
		h.agentCall("PATCH", "/agents/"+apitest.AgentA2+"/jobs/"+id+"/status", apitest.AgentA2, map[string]any{"status": "in_progress"}).Expect(t, "start", 200)
		one := "/agents/" + apitest.AgentA1 + "/jobs/" + id + "/cancel"
		h.call("POST", one, "member-a", nil).ExpectError(t, 403, "forbidden")
		h.call("POST", "/agents/"+apitest.AgentB1+"/jobs/"+id+"/cancel", "admin-a", nil).ExpectError(t, 404, "not_found")
		h.call("POST", "/agents/"+apitest.AgentA3+"/jobs/"+id+"/cancel", "admin-a", nil).ExpectError(t, 404, "not_found")
		if s := h.call("POST", one, "admin-a", nil).Expect(t, "cancel queued", 200).Str("status"); s != "cancelled" {
			t.Errorf("queued execution after cancel is %s", s)
		}
		h.call("POST", one, "admin-a", nil).ExpectError(t, 409, control.CodeExecutionEnded)
		if s := h.jobStatus(id); s != JobInProgress {
			t.Errorf("with one running the job is %s", s)
		}
		h.call("POST", "/agents/"+apitest.AgentA2+"/jobs/"+id+"/cancel", "admin-a", nil).Expect(t, "cancel in progress", 200)
		if got := h.pub.take(); !slices.Equal(got, []string{"job-cancel " + apitest.AgentA1, "job-cancel " + apitest.AgentA2}) {
			t.Errorf("cancels sent %v", got)
		}
		if s := h.jobStatus(id); s != JobCompleted {
			t.Errorf("with every execution cancelled the job is %s", s)
		}
	})
}

func TestAgentRoutesIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		next := "/agents/" + apitest.AgentA1 + "/jobs/next"
		if r := h.agentCall("GET", next, apitest.AgentA1, nil); r.Status != 204 || r.Raw != "" {
			t.Fatalf("next with nothing: %d %q", r.Status, r.Raw)
		}
		h.agentCall("GET", next, apitest.AgentA2, nil).ExpectError(t, 403, "forbidden")
		sub, err := h.streams.Subscribe(t.Context(), Channel(codec.EncodeID(must(codec.ParseUUID(apitest.TenantA)))))
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		first := h.dispatch(map[string]any{"handler": "restart-endpoint", "params": map[string]any{"endpoint": "plc"}, "timeoutSeconds": 30,
			"targets": map[string]any{"agents": []string{apitest.AgentA1}}})
		h.clock.Add(time.Second)
		second := h.dispatch(map[string]any{"handler": "sync", "targets": map[string]any{"agents": []string{apitest.AgentA1}}})
		r := h.agentCall("GET", next, apitest.AgentA1, nil).Expect(t, "next", 200)
		d, err := control.DecodeJobDispatch([]byte(r.Raw))
		if err != nil || d.JobID != first || d.Handler != "restart-endpoint" || string(d.Params) != `{"endpoint":"plc"}` || d.TimeoutSeconds != 30 {
			t.Fatalf("next = %s (%v)", r.Raw, err)
		}
		path := "/agents/" + apitest.AgentA1 + "/jobs/" + first + "/status"
		for _, tc := range []struct {
			body   string
			status int
			code   string
		}{
			{`{"status":"queued"}`, 422, "validation_failed"},
			{`{"status":"done"}`, 422, "validation_failed"},
			{`{"status":"succeeded","exitData":[1]}`, 422, "validation_failed"},
			{`not json`, 400, "invalid_body"},
		} {
			req := httptestRequest("PATCH", "/api/v1"+path, tc.body)
			req.Header.Set("X-Device-API-Key", "key-"+apitest.AgentA1)
			apitest.Do(t, h.e, req).ExpectError(t, tc.status, tc.code)
		}
		h.agentCall("PATCH", "/agents/"+apitest.AgentA1+"/jobs/"+unknown+"/status", apitest.AgentA1, map[string]any{"status": "in_progress"}).ExpectError(t, 404, "not_found")
		h.agentCall("PATCH", "/agents/"+apitest.AgentB1+"/jobs/"+first+"/status", apitest.AgentB1, map[string]any{"status": "in_progress"}).ExpectError(t, 404, "not_found")
		started := h.agentCall("PATCH", path, apitest.AgentA1, map[string]any{"status": "in_progress", "futureField": 1}).Expect(t, "start", 200)
		if started.Str("status") != "in_progress" || started.Str("startedAt") == "" {
			t.Errorf("started = %s", started.Raw)
		}
		h.clock.Add(10 * time.Second)
		beat := h.agentCall("PATCH", path, apitest.AgentA1, map[string]any{"status": "in_progress"}).Expect(t, "heartbeat", 200)
		if beat.Str("updatedAt") == started.Str("updatedAt") || beat.Str("startedAt") != started.Str("startedAt") {
			t.Errorf("heartbeat: %s after %s", beat.Raw, started.Raw)
		}
		if r := h.agentCall("GET", next, apitest.AgentA1, nil).Expect(t, "next resumes", 200); r.Str("jobId") != first {
			t.Errorf("next while one runs = %s", r.Raw)
		}
		done := h.agentCall("PATCH", path, apitest.AgentA1, map[string]any{"status": "succeeded", "result": "restarted", "exitData": map[string]any{"code": 0}}).
			Expect(t, "succeeded", 200)
		if done.Str("result") != "restarted" || done.Str("finishedAt") == "" || done.Body["exitData"].(map[string]any)["code"].(float64) != 0 {
			t.Errorf("finished = %s", done.Raw)
		}
		h.agentCall("PATCH", path, apitest.AgentA1, map[string]any{"status": "succeeded"}).Expect(t, "repeated report", 200)
		h.agentCall("PATCH", path, apitest.AgentA1, map[string]any{"status": "failed"}).ExpectError(t, 409, control.CodeExecutionEnded)
		if r := h.agentCall("GET", next, apitest.AgentA1, nil).Expect(t, "next after", 200); r.Str("jobId") != second {
			t.Errorf("next after the first = %s", r.Raw)
		}
		if s := h.jobStatus(first); s != JobCompleted {
			t.Errorf("first job is %s", s)
		}
		var got []string
		for len(got) < 5 {
			select {
			case m := <-sub.C():
				var ev Event
				if err := json.Unmarshal(m.Payload, &ev); err != nil {
					t.Fatal(err)
				}
				got = append(got, ev.AgentUUID+" "+ev.Status)
			case <-time.After(5 * time.Second):
				t.Fatalf("live events %v, want 5", got)
			}
		}
		want := []string{" in_progress", " in_progress", apitest.AgentA1 + " in_progress", apitest.AgentA1 + " succeeded", " completed"}
		if !slices.Equal(got, want) {
			t.Errorf("live events %v, want %v", got, want)
		}
		if k := h.audit.Kinds(); !slices.Contains(k, AuditExecutionPrefix+"succeeded") || !slices.Contains(k, AuditJobCompleted) {
			t.Errorf("audit kinds %v", k)
		}
	})
}

func TestReadsIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		var ids []string
		for range 3 {
			ids = append(ids, h.dispatch(map[string]any{"handler": "sync", "targets": map[string]any{"agents": []string{apitest.AgentA1, apitest.AgentA2}}}))
		}
		h.finish(ids[0], apitest.AgentA1, "failed")
		all := h.call("GET", "/jobs/executions?limit=4", "member-a", nil).Expect(t, "page 1", 200)
		cur := all.Str("nextCursor")
		if len(all.List("executions")) != 4 || cur == "" {
			t.Fatalf("page 1 = %s", all.Raw)
		}
		rest := h.call("GET", "/jobs/executions?limit=4&cursor="+cur, "member-a", nil).Expect(t, "page 2", 200)
		if len(rest.List("executions")) != 2 || rest.Body["nextCursor"] != nil {
			t.Fatalf("page 2 = %s", rest.Raw)
		}
		seen := map[string]bool{}
		for _, e := range append(all.List("executions"), rest.List("executions")...) {
			m := e.(map[string]any)
			seen[m["jobId"].(string)+m["agentUuid"].(string)] = true
		}
		if len(seen) != 6 {
			t.Errorf("two pages hold %d distinct executions, want 6", len(seen))
		}
		for q, n := range map[string]int{"status=failed": 1, "agent=" + apitest.AgentA2: 3, "jobId=" + ids[1]: 2, "status=queued&agent=" + apitest.AgentA1: 2, "": 6} {
			if l := h.call("GET", "/jobs/executions?"+q, "member-a", nil).Expect(t, q, 200).List("executions"); len(l) != n {
				t.Errorf("%s: %d executions, want %d", q, len(l), n)
			}
		}
		if l := h.call("GET", "/jobs/executions", "admin-b", nil).Expect(t, "tenant b", 200).List("executions"); len(l) != 0 {
			t.Errorf("tenant B lists %d executions", len(l))
		}
		for _, q := range []string{"status=done", "limit=0", "limit=1001", "agent=x", "jobId=y", "cursor=!"} {
			h.call("GET", "/jobs/executions?"+q, "member-a", nil).ExpectError(t, 400, "invalid_parameter")
		}
		job := h.call("GET", "/jobs/executions/"+ids[0], "member-a", nil).Expect(t, "job", 200)
		if len(job.List("executions")) != 2 || job.Body["counts"].(map[string]any)["failed"].(float64) != 1 {
			t.Errorf("job = %s", job.Raw)
		}
		h.call("GET", "/jobs/executions/"+ids[0], "admin-b", nil).ExpectError(t, 404, "not_found")
		h.call("GET", "/jobs/executions/"+unknown, "admin-a", nil).ExpectError(t, 404, "not_found")
		if l := h.call("GET", "/agents/"+apitest.AgentA1+"/jobs", "member-a", nil).Expect(t, "agent jobs", 200).List("executions"); len(l) != 3 {
			t.Errorf("agent A1 has %d executions", len(l))
		}
		h.call("GET", "/agents/"+apitest.AgentA1+"/jobs", "admin-b", nil).ExpectError(t, 404, "not_found")
		h.call("GET", "/agents/"+apitest.AgentA1+"/jobs/"+ids[0], "admin-b", nil).ExpectError(t, 404, "not_found")
		h.call("GET", "/agents/"+apitest.AgentA3+"/jobs/"+ids[0], "admin-a", nil).ExpectError(t, 404, "not_found")
		if e := h.call("GET", "/agents/"+apitest.AgentA1+"/jobs/"+ids[0], "member-a", nil).Expect(t, "execution", 200); e.Str("status") != "failed" || e.Str("handler") != "sync" {
			t.Errorf("execution = %s", e.Raw)
		}
		apitest.Call(t, h.e, "GET", "/api/v1/jobs/executions", "", nil).ExpectError(t, 401, "unauthorized")
	})
}

// TestTwoSchedulersIntegration: two replicas' schedulers passing at once
// on one database release each execution once, and time it out once.
func TestTwoSchedulersIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		other := h.deps
		otherPub := &pubRecorder{}
		other.Publisher = otherPub
		s2 := NewScheduler(other, time.Second).(*Scheduler)
		c := newCore(h.deps)
		var jobs []string
		for range 4 {
			p, err := c.prepare(t.Context(), apitest.TenantA, DispatchRequest{Handler: "sync", TimeoutSeconds: new(10),
				Targets: &TargetSpec{Agents: []string{apitest.AgentA1, apitest.AgentA2, apitest.AgentA3}}, Rollout: Rollout{AgentsPerMinute: 6}})
			if err != nil {
				t.Fatal(err)
			}
			id, err := c.create(t.Context(), apitest.TenantA, "test", p)
			if err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, id)
		}
		both := func() {
			var wg sync.WaitGroup
			for _, s := range []*Scheduler{h.sched, s2} {
				wg.Go(func() {
					if err := s.Pass(t.Context()); err != nil {
						t.Errorf("pass: %v", err)
					}
				})
			}
			wg.Wait()
		}
		for range 3 {
			both()
			h.clock.Add(10 * time.Second)
		}
		got := append(h.pub.take(), otherPub.take()...)
		if len(got) != 12 {
			t.Fatalf("two schedulers sent %d commands, want 12 (one per execution): %v", len(got), got)
		}
		for _, id := range jobs {
			for _, a := range []string{apitest.AgentA1, apitest.AgentA2, apitest.AgentA3} {
				h.agentCall("PATCH", "/agents/"+a+"/jobs/"+id+"/status", a, map[string]any{"status": "in_progress"}).Expect(t, "start", 200)
			}
		}
		h.audit.Kinds()
		h.clock.Add(10*time.Second + TimeoutGrace + time.Second)
		both()
		timedOut := 0
		for _, k := range h.audit.Kinds() {
			if k == AuditExecutionPrefix+"timed_out" {
				timedOut++
			}
		}
		if timedOut != 12 {
			t.Errorf("%d timed_out records, want 12", timedOut)
		}
		if got := append(h.pub.take(), otherPub.take()...); len(got) != 12 {
			t.Errorf("%d cancels sent, want 12", len(got))
		}
		for _, id := range jobs {
			if s := h.jobStatus(id); s != JobCompleted {
				t.Errorf("job %s is %s", id, s)
			}
		}
	})
}

// canon is raw JSON with its object keys sorted: PostgreSQL's jsonb does
// not keep the order they were written in.
func canon(raw []byte) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "invalid: " + string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestSchedulerRunIntegration: the service passes on its own and returns
// once its context ends.
func TestSchedulerRunIntegration(t *testing.T) {
	h := newHarness(t, "sqlite")
	h.dispatch(map[string]any{"handler": "sync", "targets": map[string]any{"agents": []string{apitest.AgentA1, apitest.AgentA2}},
		"rollout": map[string]any{"agentsPerMinute": 1}})
	h.pub.take()
	h.clock.Add(time.Minute)
	s := NewScheduler(h.deps, 5*time.Millisecond)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var got []string
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		got = h.pub.take()
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	if !slices.Equal(got, []string{"job " + apitest.AgentA2}) {
		t.Errorf("the running scheduler sent %v", got)
	}
}
