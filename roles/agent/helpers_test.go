package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
)

// running is an agent started in-process on a free port.
type running struct {
	t       *testing.T
	base    string
	agent   *Agent
	metrics *prometheus.Registry
	key     string
	cookies []*http.Cookie
	done    chan error
	cancel  context.CancelFunc
}

// startAgent runs the agent role as cmd would, on 127.0.0.1 with an
// ephemeral port, and waits for the API to answer. mutate adjusts the
// config first. Unless wait is false it also waits for readiness.
func startAgent(t *testing.T, dataDir string, wait bool, mutate func(*config.Agent)) *running {
	t.Helper()
	cfg := &config.Config{}
	cfg.Agent = config.Agent{Port: coretest.FreePort(t), SecurityMode: "LOCALHOST_ONLY", DataDir: dataDir}
	if mutate != nil {
		mutate(&cfg.Agent)
	}
	r := &rt.Runtime{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
	svcs, err := New(cfg, r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := svcs[1].(*Agent)
	ctx, cancel := context.WithCancel(context.Background())
	run := &running{t: t, agent: a, metrics: r.Metrics, key: cfg.Agent.APIKey.Reveal(), done: make(chan error, 1), cancel: cancel}
	go func() { run.done <- lifecycle.Run(ctx, lifecycle.Options{GracePeriod: 5 * time.Second}, svcs...) }()
	run.base = "http://127.0.0.1:" + strconv.Itoa(cfg.Agent.Port)
	deadline := time.Now().Add(10 * time.Second)
	for coretest.Dialable(strings.TrimPrefix(run.base, "http://")) != nil {
		if time.Now().After(deadline) {
			t.Fatal("agent API did not bind")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Cleanup(run.stop)
	if wait {
		run.waitReady()
	}
	return run
}

func (r *running) stop() {
	// The client may hold a connection it dialed and never used (a dial
	// that lost a race to an idle one); the server counts such a new
	// connection as busy for 5 s, past the grace period.
	http.DefaultClient.CloseIdleConnections()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			r.t.Errorf("agent stopped with %v", err)
		}
		r.done <- err
	case <-time.After(15 * time.Second):
		r.t.Error("agent did not stop")
	}
}

func (r *running) waitReady() {
	r.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if code, _ := r.do("GET", "/v1/readiness", "", nil); code == 200 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, body := r.do("GET", "/v1/readiness", "", nil)
	r.t.Fatalf("agent not ready: %s", body)
}

// do sends a request with the API key (in key mode) and the session
// cookies the client holds; hdr adds or overrides headers.
func (r *running) do(method, path, body string, hdr map[string]string) (int, string) {
	r.t.Helper()
	resp := r.raw(method, path, body, hdr)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (r *running) raw(method, path, body string, hdr map[string]string) *http.Response {
	r.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, r.base+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.key != "" {
		req.Header.Set("X-Api-Key", r.key)
	}
	for _, c := range r.cookies {
		req.AddCookie(c)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

// testClient dials a connection per request and closes it after the
// answer. With a shared keep-alive pool, a dial that lost the race to an
// idle connection lands in the pool unused after the test is done with
// it; the server counts such a new connection as busy for 5 s, the
// whole shutdown grace period, and a loaded machine turned that into
// "agent-http stop: still running after the 5s grace period".
var testClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// decode parses a JSON body into a map.
func decode(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", body, err)
	}
	return m
}

// errorOf returns the error message of the agent's error shape, failing
// when the body has another shape.
func errorOf(t *testing.T, body string) string {
	t.Helper()
	m := decode(t, body)
	msg, ok := m["error"].(string)
	if !ok || msg == "" {
		t.Fatalf("body %s is not {error: ...}", body)
	}
	return msg
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func timeAfter(seconds int) <-chan time.Time { return time.After(time.Duration(seconds) * time.Second) }
