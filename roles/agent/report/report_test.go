package report

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/sysinfo"
)

type fixedState struct{}

func (fixedState) StateReport(context.Context) (control.StateReport, error) {
	return control.StateReport{UUID: "u", Name: "n", Version: "v", State: "RUNNING", Mode: "standalone"}, nil
}

type fixedTarget struct{}

func (fixedTarget) TargetStatus() control.TargetStatus { return control.TargetStatus{Version: 7} }

// TestBuild: the service stamps the state report and adds the target
// status; the metrics report takes this host's /proc figures, the agent's
// uptime from its start and the temperature of the thermal zones.
func TestBuild(t *testing.T) {
	sys := t.TempDir()
	zone := filepath.Join(sys, "class", "thermal", "thermal_zone0")
	if err := os.MkdirAll(zone, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(zone, "temp"), []byte("48000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	s := New(Options{State: fixedState{}, Target: fixedTarget{}, Sampler: sysinfo.NewSampler("/proc", t.TempDir()),
		SysRoot: sys, Started: now.Add(-90 * time.Second)})
	st, err := s.State(t.Context(), now)
	if err != nil {
		t.Fatal(err)
	}
	if st.Timestamp != now.UnixMilli() || st.TargetState.Version != 7 || st.Endpoints == nil || st.UUID != "u" {
		t.Fatalf("state report %+v", st)
	}
	mr, err := s.Metrics(t.Context(), now)
	if err != nil {
		t.Skipf("no /proc figures here: %v", err)
	}
	if mr.AgentUptime != 90 || mr.MemoryTotal == 0 || mr.Temperature == nil || *mr.Temperature != 48 || mr.Timestamp != now.UnixMilli() {
		t.Fatalf("metrics report %+v", mr)
	}
	s.o.SysRoot = t.TempDir()
	if mr, _ := s.Metrics(t.Context(), now); mr.Temperature != nil {
		t.Fatalf("a temperature without thermal zones: %v", *mr.Temperature)
	}
}
