package ingest

import (
	"log/slog"
	"math"
	"runtime/debug"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/memlimit"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
)

// TestMemoryLimitSetting: ingest.memory_limit_mb
// (EDGEPLAT_INGEST_MEMORY_LIMIT_MB) becomes the process's soft memory limit
// when the role starts; GOMEMLIMIT, when set, wins; 0 sets none.
func TestMemoryLimitSetting(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	tests := []struct {
		name    string
		setting string
		env     string
		want    int64
	}{
		{"default sets none", "", "", math.MaxInt64},
		{"setting applies", "96", "", 96 << 20},
		{"GOMEMLIMIT wins", "96", "300MiB", math.MaxInt64}, // the runtime applied it at start, not this test
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			t.Setenv("EDGEPLAT_INGEST_MEMORY_LIMIT_MB", tt.setting)
			t.Setenv(memlimit.EnvVar, tt.env)
			cfg, err := config.Load(config.LoadOptions{Role: config.RoleIngest})
			if err != nil {
				t.Fatal(err)
			}
			r := &rt.Runtime{Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
			e, err := newEngine(cfg, r, rt.Backends{}, defaultIntervals)
			if err != nil {
				t.Fatal(err)
			}
			e.applyMemoryLimit()
			if got := debug.SetMemoryLimit(-1); got != tt.want {
				t.Errorf("memory limit %d, want %d", got, tt.want)
			}
		})
	}
}
