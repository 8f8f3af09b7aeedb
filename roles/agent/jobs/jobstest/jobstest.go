// Package jobstest is the Cloud API's two agent job routes
// (docs/fleets-and-jobs.md) as a real HTTP server over an in-memory
// execution table, for the agent's tests: the peer the agent's jobs
// service is a client of.
package jobstest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
)

// API serves GET /api/v1/agents/:uuid/jobs/next and PATCH
// /api/v1/agents/:uuid/jobs/:jobId/status for one agent and device key.
type API struct {
	srv        *httptest.Server
	uuid, key  string
	mu         sync.Mutex
	execs      []control.JobDispatch // released executions, oldest first
	status     map[string]control.ExecStatus
	updates    map[string][]control.JobStatusUpdate
	failEnds   int
	nextServed int
}

// New starts the server; it stops when the test ends.
func New(t testing.TB, agentUUID, deviceKey string) *API {
	a := &API{uuid: agentUUID, key: deviceKey, status: map[string]control.ExecStatus{}, updates: map[string][]control.JobStatusUpdate{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/agents/{uuid}/jobs/next", a.next)
	mux.HandleFunc("PATCH /api/v1/agents/{uuid}/jobs/{job}/status", a.patch)
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

// URL is the server's base URL, the agent's apiEndpoint.
func (a *API) URL() string { return a.srv.URL }

func apiError(w http.ResponseWriter, status int, code, msg string, extra map[string]any) {
	e := map[string]any{"code": code, "message": msg}
	for k, v := range extra {
		e[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": e})
}

func (a *API) auth(w http.ResponseWriter, r *http.Request) bool {
	if r.PathValue("uuid") != a.uuid || r.Header.Get("X-Device-API-Key") != a.key {
		apiError(w, http.StatusUnauthorized, "unauthorized", "bad device key", nil)
		return false
	}
	return true
}

// next answers the oldest execution queued or in progress, as the cloud
// does for an agent resuming.
func (a *API) next(w http.ResponseWriter, r *http.Request) {
	if !a.auth(w, r) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, d := range a.execs {
		if st := a.status[d.JobID]; st == control.ExecQueued || st == control.ExecInProgress {
			a.nextServed++
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(d)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) patch(w http.ResponseWriter, r *http.Request) {
	if !a.auth(w, r) {
		return
	}
	var u control.JobStatusUpdate
	if err := json.NewDecoder(r.Body).Decode(&u); err != nil || u.Check() != nil {
		apiError(w, http.StatusUnprocessableEntity, "validation_failed", "bad update", nil)
		return
	}
	id := r.PathValue("job")
	a.mu.Lock()
	defer a.mu.Unlock()
	cur, ok := a.status[id]
	switch {
	case !ok:
		apiError(w, http.StatusNotFound, "not_found", "no such execution", nil)
	case cur.Terminal():
		apiError(w, http.StatusConflict, control.CodeExecutionEnded, "the execution ended "+string(cur), map[string]any{"status": cur})
	case !cur.CanMove(u.Status):
		apiError(w, http.StatusUnprocessableEntity, "validation_failed", "status: cannot move", nil)
	case u.Status.Terminal() && a.failEnds > 0:
		a.failEnds--
		apiError(w, http.StatusServiceUnavailable, "unavailable", "try later", nil)
	default:
		a.status[id] = u.Status
		a.updates[id] = append(a.updates[id], u)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"` + string(u.Status) + `"}`))
	}
}

// Add releases a new execution and returns its dispatch.
func (a *API) Add(handler, params string, timeoutSeconds int) control.JobDispatch {
	d := control.JobDispatch{JobID: codec.NewUUID().String(), Handler: handler, TimeoutSeconds: timeoutSeconds, QueuedAt: time.Now().UTC()}
	if params != "" {
		d.Params = json.RawMessage(params)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.execs = append(a.execs, d)
	a.status[d.JobID] = control.ExecQueued
	return d
}

// SetStatus sets an execution's status (a cancel, the scheduler's
// timeout).
func (a *API) SetStatus(jobID string, st control.ExecStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status[jobID] = st
}

// Status is an execution's status.
func (a *API) Status(jobID string) control.ExecStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.status[jobID]
}

// FailEnds makes the next n terminal updates answer 503.
func (a *API) FailEnds(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failEnds = n
}

// FailEndsLeft is how many of them are still to answer.
func (a *API) FailEndsLeft() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failEnds
}

// NextServed counts the dispatches GET jobs/next answered.
func (a *API) NextServed() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nextServed
}

// Final returns the terminal update the cloud took for jobID.
func (a *API) Final(jobID string) (control.JobStatusUpdate, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, u := range a.updates[jobID] {
		if u.Status.Terminal() {
			return u, true
		}
	}
	return control.JobStatusUpdate{}, false
}
