package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

type fakeStore struct{ held, released int }

func (f *fakeStore) Hold() func() { f.held++; return func() { f.released++ } }

type fakeLifecycle struct{ state string }

func (f fakeLifecycle) Health(context.Context) Health {
	return Health{State: f.state, Ready: f.state == "RUNNING", Critical: []string{}, Unhealthy: []string{}}
}
func (f fakeLifecycle) Reboot() (string, bool) { return f.state, false }
func (f fakeLifecycle) Shutdown()              {}

// fakeSettings fails Patch with the error it holds.
type fakeSettings struct{ err error }

func (f fakeSettings) View(context.Context) any            { return map[string]any{"settings": map[string]any{}} }
func (f fakeSettings) Patch(context.Context, []byte) error { return f.err }

func serve(t *testing.T, d Deps, method, path, body string) (int, string) {
	t.Helper()
	d.Log = slog.New(slog.DiscardHandler)
	d.Metrics = prometheus.NewRegistry()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = "localhost"
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	New(d).ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestRoutesOnInterfacesOnly: the API runs on whatever implements Deps;
// the store is held for each request, and an implementation's errors map
// onto the statuses of docs/agent.md, section Errors.
func TestRoutesOnInterfacesOnly(t *testing.T) {
	st := &fakeStore{}
	d := Deps{Store: st, Lifecycle: fakeLifecycle{state: "INITIALIZING"}}
	if code, body := serve(t, d, "GET", "/v1/readiness", ""); code != 503 || !strings.Contains(body, `"state":"INITIALIZING"`) {
		t.Fatalf("readiness = %d %s", code, body)
	}
	if st.held != 1 || st.released != 1 {
		t.Fatalf("store held %d and released %d times for one request", st.held, st.released)
	}
	for _, tt := range []struct {
		err  error
		code int
		want string
	}{
		{Errorf(http.StatusConflict, "taken"), 409, `{"error":"taken"}`},
		{fmt.Errorf("open: %w", ErrNotReady), 503, ErrNotReady.Error()},
		{errors.New("disk on fire"), 500, "save settings failed; see the agent log"},
	} {
		d.Settings = fakeSettings{err: tt.err}
		code, body := serve(t, d, "PATCH", "/v1/settings", `{}`)
		if code != tt.code || !strings.Contains(body, tt.want) || strings.Contains(body, "fire") {
			t.Errorf("PATCH failing with %v = %d %s, want %d %s", tt.err, code, body, tt.code, tt.want)
		}
	}
}

// TestChangedAfterSuccessfulWrites: the agent hears of writes that
// changed something, and of nothing else.
func TestChangedAfterSuccessfulWrites(t *testing.T) {
	calls := 0
	d := Deps{Store: &fakeStore{}, Lifecycle: fakeLifecycle{state: "RUNNING"}, Changed: func() { calls++ }}
	for _, tt := range []struct {
		method, path, body string
		err                error
		want               int
	}{
		{"GET", "/v1/settings", "", nil, 0},
		{"PATCH", "/v1/settings", `{}`, nil, 1},
		{"PATCH", "/v1/settings", `{}`, Errorf(http.StatusBadRequest, "no"), 0},
		{"PATCH", "/v1/no-such-route", `{}`, nil, 0},
	} {
		calls = 0
		d.Settings = fakeSettings{err: tt.err}
		serve(t, d, tt.method, tt.path, tt.body)
		if calls != tt.want {
			t.Errorf("%s %s (%v): Changed called %d times, want %d", tt.method, tt.path, tt.err, calls, tt.want)
		}
	}
}
