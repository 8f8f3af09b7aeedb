package coretest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricValue returns the value of the counter or gauge sample of name
// whose labels include want, and fails the test when there is none.
func MetricValue(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if got[k] != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			}
		}
	}
	t.Fatalf("no sample %s%v", name, want)
	return 0
}

// PromtoolCheck lints a Prometheus exposition with `promtool check
// metrics`, naming what in a failure. Without promtool the check is
// skipped, or fails under CI (see RequireServices), which installs it.
func PromtoolCheck(t testing.TB, what, body string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		Unavailable(t, "promtool", "PATH", err)
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics on %s: %v\n%s", what, err, out)
	}
}
