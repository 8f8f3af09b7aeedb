package cmd

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/coretest"
)

func TestBenchPipelineIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	clearEnv(t)
	dbc := coretest.Postgres(t)
	redisAddr := coretest.PrivateRedis(t).Addr()
	mqttAddr := coretest.MQTTAddr(t)
	benchEnv(t, dbc, redisAddr)
	t.Setenv("MQTT_BROKER_URL", "tcp://"+mqttAddr)

	code, out, errOut := run(t, "bench", "pipeline", "--publishers", "2", "--messages", "20", "--readings", "5", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, errOut)
	}
	var rep pipelineReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not the JSON report: %v\n%s", err, out)
	}
	if rep.Messages != 40 || rep.Rows != 200 || rep.ReadingsPerSec <= 0 || rep.MessagesPerSec <= 0 || rep.ElapsedSeconds <= 0 {
		t.Errorf("report = %+v", rep)
	}
	if rep.IngestOnly == nil || rep.IngestOnly.Rows != 200 || rep.Ratio <= 0 {
		t.Errorf("ingestion-only = %+v, ratio %v", rep.IngestOnly, rep.Ratio)
	}
	if rep.Duplicates != 0 {
		t.Errorf("duplicates = %d", rep.Duplicates)
	}
	for _, w := range []string{"encode: 40 messages", "pipeline: 200 rows in"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("progress lacks %q:\n%s", w, errOut)
		}
	}

	// Two rounds: each its own pair of measurements, then the medians.
	code, out, errOut = run(t, "bench", "pipeline", "--publishers", "2", "--messages", "20", "--readings", "5", "--rounds", "2", "--json")
	if code != 0 {
		t.Fatalf("--rounds 2: exit %d\nstderr:\n%s", code, errOut)
	}
	var sum roundsSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("--rounds 2: output is not the JSON summary: %v\n%s", err, out)
	}
	if len(sum.Rounds) != 2 || sum.ReadingsPerSec.Median <= 0 || sum.Ratio.Median <= 0 {
		t.Fatalf("--rounds 2: summary = %+v", sum)
	}
	for i, r := range sum.Rounds {
		if r.Rows != 200 || r.IngestOnly == nil || r.IngestOnly.Rows != 200 || r.Tenant == sum.Rounds[1-i].Tenant {
			t.Errorf("round %d = %+v", i+1, r)
		}
	}
	if code, _, errOut := run(t, "bench", "pipeline", "--rounds", "0"); code == 0 || !strings.Contains(errOut, "--rounds") {
		t.Errorf("--rounds 0: exit %d, %q", code, errOut)
	}
}

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
	round := func(e2e, ingest, p99 float64, grew bool) pipelineReport {
		return pipelineReport{ReadingsPerSec: e2e, LatencyP99Ms: p99, BacklogGrew: grew,
			IngestOnly: &profileResult{ReadingsPerSec: ingest}, Ratio: e2e / ingest}
	}
	s := summarizeRounds([]pipelineReport{round(100, 200, 900, true), round(150, 150, 500, false), round(120, 160, 700, false)})
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
	withCPU := func(self, pg float64, ingestSelf float64) pipelineReport {
		return pipelineReport{ReadingsPerSec: 1, Messages: 1000, CPUSeconds: self, ServiceCPUSeconds: map[string]float64{"postgres": pg},
			IngestOnly: &profileResult{ReadingsPerSec: 2, Messages: 2000, CPUSeconds: ingestSelf, ServiceCPUSeconds: map[string]float64{"postgres": pg}}}
	}
	c := summarizeRounds([]pipelineReport{withCPU(0.15, 0.2, 0.1), withCPU(0.17, 0.3, 0.1), withCPU(0.16, 0.1, 0.2)})
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

	noIngest := summarizeRounds([]pipelineReport{{ReadingsPerSec: 1}, {ReadingsPerSec: 3}})
	b.Reset()
	noIngest.write(&b)
	if strings.Contains(b.String(), "ingestion-only") || noIngest.ReadingsPerSec.Median != 2 {
		t.Errorf("without ingestion-only: %+v, %q", noIngest, b.String())
	}
}
