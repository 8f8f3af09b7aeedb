package control

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
)

// Job commands, in the agent's command subtree (docs/fleets-and-jobs.md).
const (
	// CmdJob carries a JobDispatch: run this execution. It may arrive
	// more than once (MQTT redelivery, then the poll answer); the agent
	// runs an execution at most once whatever it receives.
	CmdJob = "job"
	// CmdJobCancel carries a JobCancel: stop that execution if it runs,
	// never start it if it has not.
	CmdJobCancel = "job-cancel"
)

// Job handler names: the fixed set of work an agent can run.
const (
	HandlerReboot          = "reboot"
	HandlerSync            = "sync"
	HandlerRestartEndpoint = "restart-endpoint"
	// HandlerRestartApp restarts every service of one app (docs/apps.md).
	HandlerRestartApp         = "restart-app"
	HandlerWriteRegister      = "write-register"
	HandlerUploadLogs         = "upload-logs"
	HandlerCollectDiagnostics = "collect-diagnostics"
	// HandlerShell runs a command line; the agent refuses it unless its
	// local configuration enables it (never the cloud).
	HandlerShell = "shell"
)

// JobHandlers lists every handler name, in documentation order.
var JobHandlers = []string{HandlerReboot, HandlerSync, HandlerRestartEndpoint, HandlerRestartApp,
	HandlerWriteRegister, HandlerUploadLogs, HandlerCollectDiagnostics, HandlerShell}

// IdempotentHandler reports whether running the handler again after the
// agent died in the middle of it is safe: such an execution runs again
// after the restart instead of ending failed with ReasonAgentRestarted.
// A reboot that was in progress when the agent restarted has done its
// work, and ends succeeded.
func IdempotentHandler(name string) bool {
	switch name {
	case HandlerSync, HandlerCollectDiagnostics, HandlerUploadLogs, HandlerRestartEndpoint, HandlerRestartApp:
		return true
	}
	return false
}

// ExecStatus is the state of one job execution (one job on one agent).
type ExecStatus string

// Execution states: queued → in_progress → one of the terminal states.
// A queued execution may also end cancelled or (when the job aborts)
// cancelled without running.
const (
	ExecQueued     ExecStatus = "queued"
	ExecInProgress ExecStatus = "in_progress"
	ExecSucceeded  ExecStatus = "succeeded"
	ExecFailed     ExecStatus = "failed"
	ExecTimedOut   ExecStatus = "timed_out"
	ExecCancelled  ExecStatus = "cancelled"
)

// Terminal reports whether s is a final state.
func (s ExecStatus) Terminal() bool {
	switch s {
	case ExecSucceeded, ExecFailed, ExecTimedOut, ExecCancelled:
		return true
	}
	return false
}

// Valid reports whether s is one of the execution states.
func (s ExecStatus) Valid() bool { return s == ExecQueued || s == ExecInProgress || s.Terminal() }

// CanMove reports whether an execution in state from may move to to.
// Reporting the state it is in already is allowed (an agent retrying a
// report it did not see answered), except for queued.
func (s ExecStatus) CanMove(to ExecStatus) bool {
	switch {
	case s == to:
		return s != ExecQueued
	case s == ExecQueued:
		return to == ExecInProgress || to.Terminal()
	case s == ExecInProgress:
		return to.Terminal()
	}
	return false
}

// Reasons an execution ended, in JobStatusUpdate.StatusReason.
const (
	ReasonAgentRestarted = "agent_restarted"
	ReasonTimeout        = "timeout"
	ReasonCancelled      = "cancelled"
	ReasonJobAborted     = "job_aborted"
	ReasonUnknownHandler = "unknown_handler"
	ReasonShellDisabled  = "shell_disabled"
	ReasonInvalidParams  = "invalid_params"
	ReasonHandlerError   = "handler_error"
)

// Limits of job documents and results.
const (
	MaxJobParamsBytes = 16 << 10
	MaxJobResultBytes = 64 << 10
	MaxJobExitBytes   = 16 << 10
	MaxJobTimeout     = 24 * time.Hour
)

// JobDispatch is the payload of CmdJob and the answer of
// GET /agents/:uuid/jobs/next: one execution for the agent to run.
type JobDispatch struct {
	// JobID identifies the job; with the agent it names the execution.
	JobID   string          `json:"jobId"`
	Handler string          `json:"handler"`
	Params  json.RawMessage `json:"params,omitempty"`
	// TimeoutSeconds bounds the handler's run; 0 is no bound of the job's
	// own (the agent still applies its maximum, MaxJobTimeout).
	TimeoutSeconds int       `json:"timeoutSeconds,omitempty"`
	QueuedAt       time.Time `json:"queuedAt"`
}

// Timeout is the run bound of the execution.
func (d JobDispatch) Timeout() time.Duration {
	if d.TimeoutSeconds <= 0 {
		return MaxJobTimeout
	}
	return min(time.Duration(d.TimeoutSeconds)*time.Second, MaxJobTimeout)
}

// DecodeJobDispatch decodes and checks a CmdJob payload or a jobs/next
// answer. Unknown fields are ignored, so an older agent understands a
// newer cloud; an unknown handler is not an error here (the agent reports
// it failed with ReasonUnknownHandler).
func DecodeJobDispatch(b []byte) (JobDispatch, error) {
	var d JobDispatch
	if err := decodeBounded(b, &d); err != nil {
		return d, fmt.Errorf("job dispatch: %w", err)
	}
	if _, err := codec.ParseUUID(d.JobID); err != nil {
		return d, fmt.Errorf("job dispatch: jobId: %w", err)
	}
	if !printable(d.Handler, 64) {
		return d, fmt.Errorf("job dispatch: handler must be 1..64 printable characters, got %q", clip(d.Handler))
	}
	if len(d.Params) > MaxJobParamsBytes {
		return d, fmt.Errorf("job dispatch: params of %d bytes is over %d", len(d.Params), MaxJobParamsBytes)
	}
	if len(d.Params) > 0 && !isObject(d.Params) && string(d.Params) != "null" {
		return d, fmt.Errorf("job dispatch: params must be an object")
	}
	if d.TimeoutSeconds < 0 {
		return d, fmt.Errorf("job dispatch: timeoutSeconds must be >= 0, got %d", d.TimeoutSeconds)
	}
	return d, nil
}

// JobCancel is the payload of CmdJobCancel.
type JobCancel struct {
	JobID string `json:"jobId"`
}

// DecodeJobCancel decodes and checks a CmdJobCancel payload.
func DecodeJobCancel(b []byte) (JobCancel, error) {
	var c JobCancel
	if err := decodeBounded(b, &c); err != nil {
		return c, fmt.Errorf("job cancel: %w", err)
	}
	if _, err := codec.ParseUUID(c.JobID); err != nil {
		return c, fmt.Errorf("job cancel: jobId: %w", err)
	}
	return c, nil
}

// JobStatusUpdate is the body of PATCH /agents/:uuid/jobs/:jobId/status:
// the agent's report of its execution. Status is in_progress when it
// starts (the cloud answers 409 when the execution was cancelled in the
// meantime, and the agent does not run it), then a terminal state.
type JobStatusUpdate struct {
	Status       ExecStatus `json:"status"`
	StatusReason string     `json:"statusReason,omitempty"`
	// Result is the handler's text output, at most MaxJobResultBytes.
	Result string `json:"result,omitempty"`
	// ExitData is the handler's structured result (a JSON object), at
	// most MaxJobExitBytes: the diagnostics document, a shell's exit code.
	ExitData json.RawMessage `json:"exitData,omitempty"`
}

// Check validates an update as the cloud receives it.
func (u JobStatusUpdate) Check() error {
	var errs []string
	if !u.Status.Valid() || u.Status == ExecQueued {
		errs = append(errs, fmt.Sprintf("status must be one of in_progress, succeeded, failed, timed_out, cancelled, got %q", clip(string(u.Status))))
	}
	if len(u.StatusReason) > 128 {
		errs = append(errs, "statusReason must be at most 128 bytes")
	}
	if len(u.Result) > MaxJobResultBytes {
		errs = append(errs, fmt.Sprintf("result must be at most %d bytes, got %d", MaxJobResultBytes, len(u.Result)))
	}
	if len(u.ExitData) > MaxJobExitBytes {
		errs = append(errs, fmt.Sprintf("exitData must be at most %d bytes, got %d", MaxJobExitBytes, len(u.ExitData)))
	} else if len(u.ExitData) > 0 && string(u.ExitData) != "null" && (!isObject(u.ExitData) || !json.Valid(u.ExitData)) {
		errs = append(errs, "exitData must be a JSON object")
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// KnownHandler reports whether name is one of JobHandlers.
func KnownHandler(name string) bool { return slices.Contains(JobHandlers, name) }

// CodeExecutionEnded is the error code of the cloud's 409 answer to a
// status update for an execution that has ended already (cancelled, or
// timed out by the cloud): the agent stops the handler if it runs and
// does not report it again.
const CodeExecutionEnded = "execution_ended"
