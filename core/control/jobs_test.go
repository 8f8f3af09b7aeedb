package control

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestExecStatusMoves(t *testing.T) {
	tests := []struct {
		from, to ExecStatus
		ok       bool
	}{
		{ExecQueued, ExecInProgress, true},
		{ExecQueued, ExecCancelled, true},
		{ExecQueued, ExecQueued, false},
		{ExecInProgress, ExecSucceeded, true},
		{ExecInProgress, ExecInProgress, true},
		{ExecInProgress, ExecQueued, false},
		{ExecSucceeded, ExecFailed, false},
		{ExecCancelled, ExecCancelled, true},
		{ExecTimedOut, ExecInProgress, false},
	}
	for _, tt := range tests {
		if got := tt.from.CanMove(tt.to); got != tt.ok {
			t.Errorf("%s -> %s = %v, want %v", tt.from, tt.to, got, tt.ok)
		}
	}
}

func TestDecodeJobDispatch(t *testing.T) {
	const id = "0b7d9c2e-1a53-4f7e-9a55-0a4b8f1d2c3e"
	tests := []struct {
		name, in, err string
	}{
		{"good", `{"jobId":"` + id + `","handler":"sync","params":{},"timeoutSeconds":30,"queuedAt":"2026-01-02T03:04:05Z"}`, ""},
		{"future field", `{"jobId":"` + id + `","handler":"x-new","extra":1}`, ""},
		{"bad id", `{"jobId":"nope","handler":"sync"}`, "jobId"},
		{"no handler", `{"jobId":"` + id + `"}`, "handler"},
		{"params array", `{"jobId":"` + id + `","handler":"sync","params":[1]}`, "params must be an object"},
		{"negative timeout", `{"jobId":"` + id + `","handler":"sync","timeoutSeconds":-1}`, "timeoutSeconds"},
		{"trailing", `{"jobId":"` + id + `","handler":"sync"} {}`, "trailing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeJobDispatch([]byte(tt.in))
			if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("err = %v, want %q", err, tt.err)
			}
		})
	}
}

func TestJobStatusUpdateCheck(t *testing.T) {
	tests := []struct {
		name string
		u    JobStatusUpdate
		err  string
	}{
		{"started", JobStatusUpdate{Status: ExecInProgress}, ""},
		{"result", JobStatusUpdate{Status: ExecSucceeded, Result: "ok", ExitData: json.RawMessage(`{"code":0}`)}, ""},
		{"queued", JobStatusUpdate{Status: ExecQueued}, "status"},
		{"unknown", JobStatusUpdate{Status: "done"}, "status"},
		{"long result", JobStatusUpdate{Status: ExecFailed, Result: strings.Repeat("x", MaxJobResultBytes+1)}, "result"},
		{"exit not object", JobStatusUpdate{Status: ExecFailed, ExitData: json.RawMessage(`[1]`)}, "exitData"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.u.Check()
			if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("err = %v, want %q", err, tt.err)
			}
		})
	}
}

func FuzzDecodeJobDispatch(f *testing.F) {
	f.Add([]byte(`{"jobId":"0b7d9c2e-1a53-4f7e-9a55-0a4b8f1d2c3e","handler":"sync","params":{"a":1},"timeoutSeconds":3}`))
	f.Add([]byte(`{"jobId":"0b7d9c2e-1a53-4f7e-9a55-0a4b8f1d2c3e"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeJobDispatch(b)
		if err != nil {
			return
		}
		// An accepted dispatch re-encodes to one that decodes the same.
		out, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("marshal accepted %q: %v", b, err)
		}
		d2, err := DecodeJobDispatch(out)
		if err != nil || d2.JobID != d.JobID || d2.Handler != d.Handler || d2.Timeout() != d.Timeout() {
			t.Fatalf("round trip of %q: %+v, %v", b, d2, err)
		}
	})
}
