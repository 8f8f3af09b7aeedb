package memlimit

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestApply(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	tests := []struct {
		name    string
		env     string
		start   int64 // limit in force before Apply
		limit   int64
		want    int64
		wantSrc Source
		wantSet bool
	}{
		{"setting applied", "", math.MaxInt64, 192 << 20, 192 << 20, FromSetting, true},
		{"zero leaves no limit", "", math.MaxInt64, 0, math.MaxInt64, None, false},
		{"zero keeps an earlier limit", "", 64 << 20, 0, 64 << 20, FromSetting, true},
		{"env wins over the setting", "100MiB", 100 << 20, 192 << 20, 100 << 20, FromEnv, true},
		{"env off wins too", "off", math.MaxInt64, 192 << 20, math.MaxInt64, FromEnv, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvVar, tt.env)
			// The runtime reads the variable at start only; stand in for it.
			debug.SetMemoryLimit(tt.start)
			got, src := Apply(tt.limit)
			if got != tt.want || src != tt.wantSrc {
				t.Errorf("Apply(%d) = %d, %q; want %d, %q", tt.limit, got, src, tt.want, tt.wantSrc)
			}
			cur, ok := Current()
			if cur != tt.want || ok != tt.wantSet {
				t.Errorf("Current() = %d, %v; want %d, %v", cur, ok, tt.want, tt.wantSet)
			}
		})
	}
}
