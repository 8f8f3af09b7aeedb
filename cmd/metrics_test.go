package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/broker"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// running is a command run in-process by execute.
type running struct {
	cancel context.CancelFunc
	exit   chan int
	stderr syncBuffer
}

// startRole runs edgeplat with args in-process and waits until healthURL
// answers 200.
func startRole(t *testing.T, healthURL string, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, exit: make(chan int, 1)}
	go func() { r.exit <- execute(ctx, args, io.Discard, &r.stderr) }()
	t.Cleanup(func() { r.stop(t) })
	coretest.Eventually(t, 30*time.Second, args[0]+" answers "+healthURL, func() bool {
		select {
		case code := <-r.exit:
			r.exit <- code
			t.Fatalf("%s exited %d:\n%s", args[0], code, r.stderr.String())
		default:
		}
		code, _, err := get(healthURL)
		return err == nil && code == http.StatusOK
	})
	return r
}

// stop cancels the command, as SIGINT does, and returns its log.
func (r *running) stop(t *testing.T) string {
	t.Helper()
	if r.cancel != nil {
		r.cancel()
		r.cancel = nil
		if code := <-r.exit; code != 0 {
			t.Errorf("exited %d:\n%s", code, r.stderr.String())
		}
	}
	return r.stderr.String()
}

// TestMetricsFollowPrometheusConventions starts each role in-process on
// free ports and checks what it serves on /metrics: `promtool check
// metrics` passes (skipped without promtool, required under CI),
// client_golang's linter finds nothing, every edgeplat series has the
// edgeplat_ prefix, and docs/metrics.md lists it. all-in-one, on its
// embedded defaults, composes every role onto one registry; serve-api and
// ingest run on their own too, on PostgreSQL, a private Redis and an
// embedded broker, and the agent on its own.
func TestMetricsFollowPrometheusConventions(t *testing.T) {
	clearEnv(t)
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("all-in-one", func(t *testing.T) {
		p := freeAIOPorts(t)
		startRole(t, fmt.Sprintf("http://127.0.0.1:%d/health", p.api), p.args(filepath.Join(t.TempDir(), "data"))...)
		for _, port := range []int{p.api, p.ingest, p.agent} {
			checkMetrics(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), doc)
		}
	})
	t.Run("agent", func(t *testing.T) {
		port := coretest.FreePort(t)
		startRole(t, fmt.Sprintf("http://127.0.0.1:%d/v1/healthy", port),
			"agent", "--port", strconv.Itoa(port), "--data-dir", filepath.Join(t.TempDir(), "agent"))
		checkMetrics(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), doc)
	})
	t.Run("serve-api and ingest", func(t *testing.T) {
		if testing.Short() {
			t.Skip("needs PostgreSQL and redis-server; -short given")
		}
		dbc := coretest.Postgres(t)
		redis := coretest.PrivateRedis(t)
		brk, err := broker.New(broker.Options{Bind: "127.0.0.1"}, &rt.Runtime{Logger: slog.New(slog.DiscardHandler), Health: health.New(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if err := brk.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = brk.Stop(context.Background()) }()
		host, port, _ := net.SplitHostPort(redis.Addr())
		for k, v := range map[string]string{
			"DB_HOST": dbc.Host, "DB_PORT": strconv.Itoa(dbc.Port), "DB_NAME": dbc.Name, "DB_USER": dbc.User, "DB_SSL": "disable",
			"STREAMSTORE_HOST": host, "STREAMSTORE_PORT": port, "MQTT_BROKER_URL": "tcp://" + brk.Addr(),
			"JWT_SECRET": "metrics-test-secret-of-at-least-32-bytes",
		} {
			t.Setenv(k, v)
		}
		apiPort, ingestPort := coretest.FreePort(t), coretest.FreePort(t)
		startRole(t, fmt.Sprintf("http://127.0.0.1:%d/health", apiPort), "serve-api", "--port", strconv.Itoa(apiPort))
		startRole(t, fmt.Sprintf("http://127.0.0.1:%d/health", ingestPort), "ingest", "--port", strconv.Itoa(ingestPort))
		checkMetrics(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", apiPort), doc)
		checkMetrics(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", ingestPort), doc)
	})
}

// checkMetrics scrapes url and holds it to docs/metrics.md's conventions.
func checkMetrics(t *testing.T, url string, doc []byte) {
	t.Helper()
	// A first request, so the request histogram has a series.
	if _, _, err := get(url); err != nil {
		t.Fatal(err)
	}
	code, body, err := get(url)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, code, err)
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("lint %s: %v", url, err)
	}
	for _, pr := range problems {
		t.Errorf("%s: %s: %s", url, pr.Metric, pr.Text)
	}
	for _, name := range familyNames(body) {
		if !ours(name) {
			continue
		}
		if !strings.HasPrefix(name, "edgeplat_") {
			t.Errorf("%s: %s lacks the edgeplat_ prefix", url, name)
		}
		if !bytes.Contains(doc, []byte("`"+name+"`")) {
			t.Errorf("%s: %s is not listed in docs/metrics.md", url, name)
		}
	}
	coretest.PromtoolCheck(t, url, body)
}

// ours tells edgeplat's series from those of the Go runtime, the process
// and the HTTP handler, which client_golang names.
func ours(name string) bool {
	for _, p := range []string{"go_", "process_", "promhttp_"} {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	return true
}

// familyNames lists the metric families of a text exposition, by their
// TYPE lines.
func familyNames(body string) []string {
	var names []string
	for line := range strings.Lines(body) {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			names = append(names, f[2])
		}
	}
	slices.Sort(names)
	return names
}

// TestAllInOneStopLogsNoEmptyWarning stops all-in-one the way Ctrl-C
// does, with the API's MQTT client connected to the embedded broker. mochi
// logged a WARN with an empty message for each client the shutdown closed.
func TestAllInOneStopLogsNoEmptyWarning(t *testing.T) {
	clearEnv(t)
	p := freeAIOPorts(t)
	r := startRole(t, fmt.Sprintf("http://127.0.0.1:%d/health", p.api), p.args(filepath.Join(t.TempDir(), "data"))...)
	logs := r.stop(t)
	for line := range strings.Lines(logs) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec["msg"] == "" || (rec["component"] == "mqtt-broker" && rec["level"] != "INFO" && rec["level"] != "DEBUG") {
			t.Errorf("shutdown logged %s", strings.TrimSpace(line))
		}
	}
	if !strings.Contains(logs, `"mqtt broker listening"`) {
		t.Fatalf("no broker log captured:\n%s", logs)
	}
}
