package cmd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// TestMetricsFollowPrometheusConventions runs all-in-one in-process on its
// embedded defaults, which composes every role (serve-api, ingest, the
// agent, the broker) onto one registry, and checks what each role's port
// serves on /metrics: `promtool check metrics` passes (skipped without
// promtool, required under CI), client_golang's linter finds nothing, every
// edgeplat series has the edgeplat_ prefix, and docs/metrics.md lists it.
func TestMetricsFollowPrometheusConventions(t *testing.T) {
	clearEnv(t)
	p := freeAIOPorts(t)
	ctx, cancel := context.WithCancel(context.Background())
	exit := make(chan int, 1)
	var stderr syncBuffer
	go func() { exit <- execute(ctx, p.args(filepath.Join(t.TempDir(), "data")), io.Discard, &stderr) }()
	defer func() {
		cancel()
		if code := <-exit; code != 0 {
			t.Errorf("all-in-one exited %d:\n%s", code, stderr.String())
		}
	}()
	coretest.Eventually(t, 20*time.Second, "all-in-one answers /health", func() bool {
		code, _, err := get(fmt.Sprintf("http://127.0.0.1:%d/health", p.api))
		return err == nil && code == http.StatusOK
	})

	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	promtool, lookErr := exec.LookPath("promtool")
	for _, role := range []struct {
		name string
		port int
	}{{"serve-api", p.api}, {"ingest", p.ingest}, {"agent", p.agent}} {
		t.Run(role.name, func(t *testing.T) {
			url := fmt.Sprintf("http://127.0.0.1:%d/metrics", role.port)
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
				t.Errorf("%s: %s", pr.Metric, pr.Text)
			}
			for _, name := range familyNames(body) {
				if !ours(name) {
					continue
				}
				if !strings.HasPrefix(name, "edgeplat_") {
					t.Errorf("%s lacks the edgeplat_ prefix", name)
				}
				if !regexp.MustCompile("`" + regexp.QuoteMeta(name) + "`").Match(doc) {
					t.Errorf("%s is not listed in docs/metrics.md", name)
				}
			}
			if lookErr != nil {
				coretest.Unavailable(t, "promtool", "PATH", lookErr)
			}
			cmd := exec.Command(promtool, "check", "metrics")
			cmd.Stdin = strings.NewReader(body)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("promtool check metrics on %s: %v\n%s", url, err, out)
			}
		})
	}
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
