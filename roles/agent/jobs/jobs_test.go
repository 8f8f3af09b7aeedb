package jobs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/jobs/jobstest"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

func metric(t *testing.T, h *harness, name string, labels map[string]string) float64 {
	t.Helper()
	return coretest.MetricValue(t, h.reg, name, labels)
}

// TestHandlers: each handler's final report, from the poll at start.
func TestHandlers(t *testing.T) {
	tests := []struct {
		name, handler, params string
		shell                 bool
		status                control.ExecStatus
		reason                string
		result, exit          string // substrings
	}{
		{"sync", control.HandlerSync, "", false, control.ExecSucceeded, "", "version 7", `"version":7`},
		{"restart-endpoint", control.HandlerRestartEndpoint, `{"endpoint":"plc1"}`, false, control.ExecSucceeded, "", `"plc1" restarted`, ""},
		{"restart unknown endpoint", control.HandlerRestartEndpoint, `{"endpoint":"nope"}`, false, control.ExecFailed, control.ReasonInvalidParams, "no endpoint nope", ""},
		{"restart without endpoint", control.HandlerRestartEndpoint, `{}`, false, control.ExecFailed, control.ReasonInvalidParams, "endpoint is required", ""},
		{"misspelt param", control.HandlerRestartEndpoint, `{"endpiont":"plc1"}`, false, control.ExecFailed, control.ReasonInvalidParams, "endpiont", ""},
		{"restart-app", control.HandlerRestartApp, `{"appId":3}`, false, control.ExecSucceeded, "", "app 3 restarted", `"appId":3`},
		{"restart-app id as a string", control.HandlerRestartApp, `{"appId":"3"}`, false, control.ExecSucceeded, "", "app 3 restarted", `"appId":3`},
		{"restart unknown app", control.HandlerRestartApp, `{"appId":9}`, false, control.ExecFailed, control.ReasonInvalidParams, "no app 9", ""},
		{"restart-app without appId", control.HandlerRestartApp, `{}`, false, control.ExecFailed, control.ReasonInvalidParams, "appId is required", ""},
		{"restart-app negative appId", control.HandlerRestartApp, `{"appId":-1}`, false, control.ExecFailed, control.ReasonInvalidParams, "positive integer", ""},
		{"restart-app fractional appId", control.HandlerRestartApp, `{"appId":1.5}`, false, control.ExecFailed, control.ReasonInvalidParams, "positive integer", ""},
		{"restart-app appId not a number", control.HandlerRestartApp, `{"appId":"web"}`, false, control.ExecFailed, control.ReasonInvalidParams, "appId", ""},
		{"write-register", control.HandlerWriteRegister, `{"endpoint":"plc1","register":"holding:1","value":12345678901234567}`, false, control.ExecSucceeded, "", "12345678901234567", `"value":12345678901234567`},
		{"write without value", control.HandlerWriteRegister, `{"endpoint":"plc1","register":"holding:1"}`, false, control.ExecFailed, control.ReasonInvalidParams, "required", ""},
		{"upload-logs", control.HandlerUploadLogs, "", false, control.ExecSucceeded, "", "shipped 3", ""},
		{"collect-diagnostics", control.HandlerCollectDiagnostics, "", false, control.ExecSucceeded, "", "", `"health":{"overall":"ok"}`},
		{"unknown handler", "defrag", "", false, control.ExecFailed, control.ReasonUnknownHandler, "unknown handler", ""},
		{"shell disabled", control.HandlerShell, `{"command":"echo hi"}`, false, control.ExecFailed, control.ReasonShellDisabled, "agent.jobs_shell", ""},
		{"shell", control.HandlerShell, `{"command":"echo hi; echo err >&2"}`, true, control.ExecSucceeded, "", "hi\nerr\n", `"exitCode":0`},
		{"shell exit code", control.HandlerShell, `{"command":"echo bye; exit 3"}`, true, control.ExecFailed, control.ReasonHandlerError, "bye", `"exitCode":3`},
		{"shell without command", control.HandlerShell, `{}`, true, control.ExecFailed, control.ReasonInvalidParams, "command is required", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := jobstest.New(t, agentUUID, deviceKey)
			d := api.Add(tt.handler, tt.params, 0)
			h := newHarness(t, api, t.TempDir(), func(o *Options) { o.Shell = tt.shell }).start()
			u := h.waitFinal(d.JobID)
			if u.Status != tt.status || u.StatusReason != tt.reason || !strings.Contains(u.Result, tt.result) || !strings.Contains(string(u.ExitData), tt.exit) {
				t.Fatalf("final %+v (exitData %s), want %s %q result ~%q exit ~%q", u, u.ExitData, tt.status, tt.reason, tt.result, tt.exit)
			}
			label := tt.handler
			if !control.KnownHandler(label) {
				label = "unknown"
			}
			coretest.Eventually(t, 5*time.Second, "the row reported", func() bool { return h.job(d.JobID).Reported })
			if got := metric(t, h, "edgeplat_agent_job_runs_total", map[string]string{"handler": label, "status": string(tt.status)}); got != 1 {
				t.Errorf("runs{%s,%s} = %v", label, tt.status, got)
			}
			if j := h.job(d.JobID); j.State != store.JobEnded || j.Status != string(tt.status) {
				t.Errorf("row %+v", j)
			}
		})
	}
}

// TestRestartAppWithoutApps: an agent built without apps fails the
// handler, saying so, rather than succeeding at nothing.
func TestRestartAppWithoutApps(t *testing.T) {
	api := jobstest.New(t, agentUUID, deviceKey)
	d := api.Add(control.HandlerRestartApp, `{"appId":3}`, 0)
	h := newHarness(t, api, t.TempDir(), func(o *Options) { o.Apps = nil }).start()
	u := h.waitFinal(d.JobID)
	if u.Status != control.ExecFailed || u.StatusReason != control.ReasonHandlerError || !strings.Contains(u.Result, "does not manage apps") {
		t.Fatalf("final %+v", u)
	}
	if n := h.act.count("restart-app"); n != 0 {
		t.Fatalf("restart-app ran %d times", n)
	}
}

// TestShellOutputCapAndTimeout: the output is cut at MaxJobResultBytes;
// a command past its timeout is killed with its process group.
func TestShellOutputCapAndTimeout(t *testing.T) {
	api := jobstest.New(t, agentUUID, deviceKey)
	big := api.Add(control.HandlerShell, `{"command":"head -c 200000 /dev/zero | tr '\\0' x"}`, 0)
	slow := api.Add(control.HandlerShell, `{"command":"sleep 30 & sleep 30; echo never"}`, 1)
	h := newHarness(t, api, t.TempDir(), func(o *Options) { o.Shell = true }).start()
	u := h.waitFinal(big.JobID)
	if u.Status != control.ExecSucceeded || len(u.Result) != control.MaxJobResultBytes || strings.Trim(u.Result, "x") != "" {
		t.Fatalf("big output: %s, %d bytes of result", u.Status, len(u.Result))
	}
	u = h.waitFinal(slow.JobID)
	if u.Status != control.ExecTimedOut || u.StatusReason != control.ReasonTimeout || strings.Contains(u.Result, "never") {
		t.Fatalf("slow command: %+v", u)
	}
}

// TestDuplicateDispatchRunsOnce: the same jobId from the command channel
// (twice) and from the poll runs once.
func TestDuplicateDispatchRunsOnce(t *testing.T) {
	api := jobstest.New(t, agentUUID, deviceKey)
	h := newHarness(t, api, t.TempDir(), nil).start()
	d := api.Add(control.HandlerSync, "", 0)
	h.dispatch(d)
	h.dispatch(d)
	h.platform.up.Store(true) // a reconnect polls, and the poll answers d while it runs or not
	h.waitFinal(d.JobID)
	h.dispatch(d)
	coretest.Eventually(t, 5*time.Second, "duplicates counted", func() bool {
		return metric(t, h, "edgeplat_agent_job_duplicates_total", nil) >= 2
	})
	if n := h.act.count("sync"); n != 1 {
		t.Fatalf("sync ran %d times", n)
	}
}

// TestCancelQueued: an execution the cloud cancelled before it started
// (409 to in_progress) never runs and ends with the cloud's status; a
// cancel that arrives before the dispatch keeps it from running.
func TestCancelQueued(t *testing.T) {
	api := jobstest.New(t, agentUUID, deviceKey)
	h := newHarness(t, api, t.TempDir(), nil).start()
	d := api.Add(control.HandlerSync, "", 0)
	api.SetStatus(d.JobID, control.ExecCancelled)
	h.dispatch(d)
	coretest.Eventually(t, 5*time.Second, "the row ended", func() bool {
		j, err := h.st.Jobs().Get(context.Background(), d.JobID)
		return err == nil && j.State == store.JobEnded
	})
	if j := h.job(d.JobID); j.Status != string(control.ExecCancelled) || !j.Reported {
		t.Fatalf("row %+v", j)
	}

	early := api.Add(control.HandlerSync, "", 0)
	h.cancelJob(early.JobID)
	coretest.Eventually(t, 5*time.Second, "the tombstone", func() bool {
		j, err := h.st.Jobs().Get(context.Background(), early.JobID)
		return err == nil && j.State == store.JobEnded
	})
	h.dispatch(early)
	// One more execution behind it shows the queue moved past both.
	last := api.Add(control.HandlerUploadLogs, "", 0)
	h.dispatch(last)
	h.waitFinal(last.JobID)
	if n := h.act.count("sync"); n != 0 {
		t.Fatalf("sync ran %d times", n)
	}
}

// TestCancelInProgress: CmdJobCancel and the cloud's 409 to a heartbeat
// both cancel a running handler's context; the execution ends cancelled.
func TestCancelInProgress(t *testing.T) {
	for _, how := range []string{"command", "heartbeat 409"} {
		t.Run(how, func(t *testing.T) {
			api := jobstest.New(t, agentUUID, deviceKey)
			h := newHarness(t, api, t.TempDir(), func(o *Options) {
				o.PollInterval = func() time.Duration { return 50 * time.Millisecond }
			})
			h.act.block.Store(true)
			h.start()
			d := api.Add(control.HandlerSync, "", 0)
			h.dispatch(d)
			<-h.act.started
			if how == "command" {
				h.cancelJob(d.JobID)
				u := h.waitFinal(d.JobID)
				if u.Status != control.ExecCancelled || u.StatusReason != control.ReasonCancelled {
					t.Fatalf("final %+v", u)
				}
			} else {
				api.SetStatus(d.JobID, control.ExecCancelled)
			}
			coretest.Eventually(t, 5*time.Second, "the row ended", func() bool { return h.job(d.JobID).State == store.JobEnded })
			if j := h.job(d.JobID); j.Status != string(control.ExecCancelled) || j.Reason != control.ReasonCancelled {
				t.Fatalf("row %+v", j)
			}
			coretest.Eventually(t, 5*time.Second, "the run counted", func() bool {
				return metric(t, h, "edgeplat_agent_job_runs_total", map[string]string{"handler": "sync", "status": "cancelled"}) == 1
			})
		})
	}
}

// TestTimeout: a handler past the dispatch's timeout ends timed_out.
func TestTimeout(t *testing.T) {
	api := jobstest.New(t, agentUUID, deviceKey)
	h := newHarness(t, api, t.TempDir(), nil)
	h.act.block.Store(true)
	h.start()
	d := api.Add(control.HandlerRestartEndpoint, `{"endpoint":"plc1"}`, 1)
	h.dispatch(d)
	u := h.waitFinal(d.JobID)
	if u.Status != control.ExecTimedOut || u.StatusReason != control.ReasonTimeout {
		t.Fatalf("final %+v", u)
	}
}

// TestFinalReportRetried: a final status the cloud does not take (503)
// is sent again until it does; the row stays unreported until then.
func TestFinalReportRetried(t *testing.T) {
	api := jobstest.New(t, agentUUID, deviceKey)
	api.FailEnds(3)
	d := api.Add(control.HandlerSync, "", 0)
	h := newHarness(t, api, t.TempDir(), nil).start()
	u := h.waitFinal(d.JobID)
	if u.Status != control.ExecSucceeded {
		t.Fatalf("final %+v", u)
	}
	coretest.Eventually(t, 5*time.Second, "the row reported", func() bool { return h.job(d.JobID).Reported })
	if left := api.FailEndsLeft(); left != 0 {
		t.Fatalf("%d refusals left: the report was not retried", left)
	}
}

// TestRestartMidJob: the agent dies while a job runs. At the next start a
// non-idempotent one ends failed agent_restarted and does not run again;
// an idempotent one runs again; a reboot ends succeeded.
func TestRestartMidJob(t *testing.T) {
	tests := []struct {
		handler, params, action string
		status                  control.ExecStatus
		reason                  string
		runs                    int
	}{
		{control.HandlerWriteRegister, `{"endpoint":"plc1","register":"coil:1","value":true}`, "write", control.ExecFailed, control.ReasonAgentRestarted, 0},
		{control.HandlerSync, "", "sync", control.ExecSucceeded, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.handler, func(t *testing.T) {
			api := jobstest.New(t, agentUUID, deviceKey)
			dir := t.TempDir()
			h := newHarness(t, api, dir, nil)
			h.act.block.Store(true)
			h.start()
			d := api.Add(tt.handler, tt.params, 0)
			h.dispatch(d)
			<-h.act.started
			if st := api.Status(d.JobID); st != control.ExecInProgress {
				t.Fatalf("cloud status %s while it runs", st)
			}
			h.kill()
			if j := h.job2(dir, d.JobID); j.State != store.JobRunning {
				t.Fatalf("row after the kill %+v", j)
			}

			again := newHarness(t, api, dir, nil).start()
			u := again.waitFinal(d.JobID)
			if u.Status != tt.status || u.StatusReason != tt.reason {
				t.Fatalf("final %+v", u)
			}
			coretest.Eventually(t, 5*time.Second, "the row reported", func() bool { return again.job(d.JobID).Reported })
			if n := again.act.count(tt.action); n != tt.runs {
				t.Fatalf("%s ran %d times after the restart, want %d", tt.action, n, tt.runs)
			}
		})
	}
}

// job2 reads a row from a closed harness's store.
func (h *harness) job2(dir, id string) store.Job {
	h.t.Helper()
	st, err := store.Open(context.Background(), dir, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	defer st.Close()
	j, err := st.Jobs().Get(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return j
}

// TestReboot: the reboot's success is reported before the agent reboots;
// one left running by a restart ends succeeded.
func TestReboot(t *testing.T) {
	api := jobstest.New(t, agentUUID, deviceKey)
	h := newHarness(t, api, t.TempDir(), nil)
	d := api.Add(control.HandlerReboot, "", 0)
	reported := make(chan control.ExecStatus, 1)
	h.act.reboot = func() { reported <- api.Status(d.JobID) }
	h.start()
	select {
	case st := <-reported:
		if st != control.ExecSucceeded {
			t.Fatalf("cloud status %s when the reboot started", st)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reboot")
	}

	// Left running (the process died between the start and the end).
	dir := t.TempDir()
	left := api.Add(control.HandlerReboot, "", 0)
	st, err := store.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Jobs().Receive(context.Background(), store.Job{JobID: left.JobID, Handler: control.HandlerReboot}); err != nil {
		t.Fatal(err)
	}
	if err := st.Jobs().SetState(context.Background(), left.JobID, store.JobRunning); err != nil {
		t.Fatal(err)
	}
	st.Close()
	api.SetStatus(left.JobID, control.ExecInProgress)
	r := newHarness(t, api, dir, nil).start()
	if u := r.waitFinal(left.JobID); u.Status != control.ExecSucceeded {
		t.Fatalf("final %+v", u)
	}
	if n := r.act.count("reboot"); n != 0 {
		t.Fatalf("rebooted %d times after the restart", n)
	}
}

// TestRecentNewestFirst: the local API's list.
func TestRecentNewestFirst(t *testing.T) {
	api := jobstest.New(t, agentUUID, deviceKey)
	a := api.Add(control.HandlerSync, "", 0)
	h := newHarness(t, api, t.TempDir(), nil).start()
	h.waitFinal(a.JobID)
	b := api.Add(control.HandlerUploadLogs, "", 0)
	h.dispatch(b)
	h.waitFinal(b.JobID)
	jobs, err := h.svc.Recent(context.Background(), 10)
	if err != nil || len(jobs) != 2 || jobs[0].JobID != b.JobID || jobs[1].JobID != a.JobID {
		t.Fatalf("recent %+v %v", jobs, err)
	}
	if _, err := json.Marshal(jobs); err != nil {
		t.Fatal(err)
	}
}
