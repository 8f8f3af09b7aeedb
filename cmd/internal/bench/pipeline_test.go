package bench

import (
	"strings"
	"testing"
)

func TestSpreadOf(t *testing.T) {
	for _, tc := range []struct {
		vals []float64
		want benchSpread
	}{
		{nil, benchSpread{}},
		{[]float64{5}, benchSpread{5, 5, 5}},
		{[]float64{3, 1, 2}, benchSpread{2, 1, 3}},
		{[]float64{4, 1, 3, 2}, benchSpread{2.5, 1, 4}},
	} {
		if got := spreadOf(tc.vals); got != tc.want {
			t.Errorf("spreadOf(%v) = %+v, want %+v", tc.vals, got, tc.want)
		}
	}
}

// TestSummarizeRounds: medians over the rounds, the ratio of each round
// (not the ratio of the medians), and the rounds whose backlog grew.
func TestSummarizeRounds(t *testing.T) {
	round := func(e2e, ingest, p99 float64, grew bool) PipelineReport {
		return PipelineReport{ReadingsPerSec: e2e, LatencyP99Ms: p99, BacklogGrew: grew,
			IngestOnly: &ProfileResult{ReadingsPerSec: ingest}, Ratio: e2e / ingest}
	}
	s := summarizeRounds([]PipelineReport{round(100, 200, 900, true), round(150, 150, 500, false), round(120, 160, 700, false)})
	if s.ReadingsPerSec != (benchSpread{120, 100, 150}) || s.IngestOnlyReadingsPerSec != (benchSpread{160, 150, 200}) {
		t.Errorf("rates = %+v, %+v", s.ReadingsPerSec, s.IngestOnlyReadingsPerSec)
	}
	if s.Ratio != (benchSpread{0.75, 0.5, 1}) || s.LatencyP99Ms != (benchSpread{700, 500, 900}) || s.BacklogGrewRounds != 1 {
		t.Errorf("ratio %+v, p99 %+v, grew %d", s.Ratio, s.LatencyP99Ms, s.BacklogGrewRounds)
	}
	var b strings.Builder
	s.write(&b)
	if !strings.Contains(b.String(), "ratio 0.75 (0.50-1.00") {
		t.Errorf("summary = %q", b.String())
	}
	if len(s.CPUPerMessageUs) != 0 {
		t.Errorf("rounds without messages gave CPU figures: %+v", s.CPUPerMessageUs)
	}

	// CPU per message: this process and the services, each phase apart.
	withCPU := func(self, pg float64, ingestSelf float64) PipelineReport {
		return PipelineReport{ReadingsPerSec: 1, Messages: 1000, CPUSeconds: self, ServiceCPUSeconds: map[string]float64{"postgres": pg},
			IngestOnly: &ProfileResult{ReadingsPerSec: 2, Messages: 2000, CPUSeconds: ingestSelf, ServiceCPUSeconds: map[string]float64{"postgres": pg}}}
	}
	c := summarizeRounds([]PipelineReport{withCPU(0.15, 0.2, 0.1), withCPU(0.17, 0.3, 0.1), withCPU(0.16, 0.1, 0.2)})
	if c.CPUPerMessageUs["edgeplat"] != (benchSpread{160, 150, 170}) || c.CPUPerMessageUs["postgres"] != (benchSpread{200, 100, 300}) {
		t.Errorf("end-to-end cpu/message = %+v", c.CPUPerMessageUs)
	}
	if c.IngestOnlyCPUPerMessageUs["edgeplat"] != (benchSpread{50, 50, 100}) || c.IngestOnlyCPUPerMessageUs["postgres"] != (benchSpread{100, 50, 150}) {
		t.Errorf("ingestion-only cpu/message = %+v", c.IngestOnlyCPUPerMessageUs)
	}
	b.Reset()
	c.write(&b)
	if !strings.Contains(b.String(), "end to end edgeplat 160 µs (150-170), postgres 200 µs (100-300)") ||
		!strings.Contains(b.String(), "ingestion-only edgeplat 50 µs (50-100), postgres 100 µs (50-150)") {
		t.Errorf("summary = %q", b.String())
	}

	noIngest := summarizeRounds([]PipelineReport{{ReadingsPerSec: 1}, {ReadingsPerSec: 3}})
	b.Reset()
	noIngest.write(&b)
	if strings.Contains(b.String(), "ingestion-only") || noIngest.ReadingsPerSec.Median != 2 {
		t.Errorf("without ingestion-only: %+v, %q", noIngest, b.String())
	}
}
