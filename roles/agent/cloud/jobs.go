package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/edgeplat/edgeplat/core/control"
)

// EndedError is the cloud's 409 control.CodeExecutionEnded answer to a
// status update: the execution ended already, with Status.
type EndedError struct {
	Status control.ExecStatus
	Err    *Error
}

func (e *EndedError) Error() string { return fmt.Sprintf("execution ended %s: %v", e.Status, e.Err) }

func (e *EndedError) Unwrap() error { return e.Err }

// NextJob asks GET /agents/:uuid/jobs/next for the execution the agent
// should run next; ok is false when there is none (204).
func (c *Client) NextJob(ctx context.Context, cr Credentials) (d control.JobDispatch, ok bool, err error) {
	var raw json.RawMessage
	status, _, err := c.do(ctx, http.MethodGet, "/agents/"+url.PathEscape(cr.AgentUUID)+"/jobs/next", nil,
		map[string]string{"X-Device-API-Key": cr.APIKey}, &raw)
	if err != nil {
		return d, false, fmt.Errorf("next job: %w", err)
	}
	if status == http.StatusNoContent || len(raw) == 0 {
		return d, false, nil
	}
	d, err = control.DecodeJobDispatch(raw)
	if err != nil {
		return d, false, fmt.Errorf("next job: %w", err)
	}
	return d, true, nil
}

// ReportJob sends PATCH /agents/:uuid/jobs/:jobId/status. A 409
// control.CodeExecutionEnded is an *EndedError naming the status the
// execution ended with (cancelled when the answer does not say).
func (c *Client) ReportJob(ctx context.Context, cr Credentials, jobID string, u control.JobStatusUpdate) error {
	body, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("report job %s: %w", jobID, err)
	}
	path := "/agents/" + url.PathEscape(cr.AgentUUID) + "/jobs/" + url.PathEscape(jobID) + "/status"
	_, _, err = c.do(ctx, http.MethodPatch, path, body, map[string]string{"X-Device-API-Key": cr.APIKey}, nil)
	var ce *Error
	if errors.As(err, &ce) && ce.Status == http.StatusConflict && ce.Code == control.CodeExecutionEnded {
		return &EndedError{Status: endedStatus(ce.raw), Err: ce}
	}
	if err != nil {
		return fmt.Errorf("report job %s: %w", jobID, err)
	}
	return nil
}

// endedStatus finds the status a 409 names: error.status, status or
// execution.status; cancelled when none is a terminal state.
func endedStatus(raw []byte) control.ExecStatus {
	var shape struct {
		Status control.ExecStatus `json:"status"`
		Error  struct {
			Status control.ExecStatus `json:"status"`
		} `json:"error"`
		Execution struct {
			Status control.ExecStatus `json:"status"`
		} `json:"execution"`
	}
	_ = json.Unmarshal(raw, &shape)
	for _, s := range []control.ExecStatus{shape.Error.Status, shape.Status, shape.Execution.Status} {
		if s.Terminal() {
			return s
		}
	}
	return control.ExecCancelled
}
