package store

import (
	"reflect"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/anomaly/detect"
)

// TestAnomalyBaselines: a save replaces the stored set as a whole, values
// and sample counts come back as saved, and a factory reset deletes them.
func TestAnomalyBaselines(t *testing.T) {
	ctx := t.Context()
	s := open(t, t.TempDir())
	at := time.UnixMilli(1_790_000_000_123).UTC()
	first := []detect.Baseline{
		{Metric: "temp", DeviceID: "plc", TimeSlot: 3, Mean: 21.5, StdDev: 0.25, Median: 21.4, MAD: 0.2, SampleCount: 240, CalculatedAt: at},
		{Metric: "temp", DeviceID: "plc", TimeSlot: 4, Mean: 22, StdDev: 0.5, Median: 22.1, MAD: 0.3, SampleCount: 17, CalculatedAt: at},
		{Metric: "cpu_usage", DeviceID: "system", TimeSlot: 0, Mean: 3, StdDev: 1, Median: 2.5, MAD: 0.5, SampleCount: 1 << 40, CalculatedAt: at},
	}
	second := first[1:2]
	for _, tc := range []struct {
		name string
		save []detect.Baseline
		want []detect.Baseline
	}{
		{"empty store", nil, nil},
		{"three rows", first, []detect.Baseline{first[2], first[0], first[1]}},
		{"replaced by one", second, second},
	} {
		if tc.save != nil {
			if err := s.Baselines().SaveAnomalyBaselines(ctx, tc.save); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		got, err := s.Baselines().AnomalyBaselines(ctx)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if err := s.FactoryReset(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Baselines().AnomalyBaselines(ctx); err != nil || len(got) != 0 {
		t.Fatalf("after a factory reset: %+v, %v", got, err)
	}
}
