package payload

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/anomaly/detect"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
)

// enrichedFixture is fixture() with anomaly results on three readings:
// the first temperature (index 0), the count (1) with a time to
// threshold, and the second message's pressure (9), which also checks
// that indices count across messages.
func enrichedFixture() batch.Batch {
	b := fixture()
	b.Anomaly = []detect.Result{
		{Index: 0, AnomalyScore: 0.2, AnomalyThreshold: 0.5, BaselineSamples: 240, DetectionMethods: []string{},
			PredictedNext: 21.6, Trend: detect.TrendStable, TrendStrength: 0.05, ForecastConfidence: 0.9},
		{Index: 1, AnomalyScore: 0.75, AnomalyThreshold: 0.5, BaselineSamples: 30, DetectionMethods: []string{"zscore", "mad"},
			PredictedNext: 44, Trend: detect.TrendRising, TrendStrength: 0.8, ForecastConfidence: 0.6,
			TimeToThreshold: &detect.TimeToThreshold{Threshold: 50, EstimatedSeconds: 12.5, Confidence: 0.48}},
		{Index: 9, AnomalyScore: 1, AnomalyThreshold: 0.5, BaselineSamples: 21, DetectionMethods: []string{"rate"},
			PredictedNext: 1.4, Trend: detect.TrendFalling, TrendStrength: 0.3, ForecastConfidence: 0.7},
	}
	return b
}

// TestEnrichmentGolden: with anomaly results the custom and ml documents
// carry the enrichment fields on exactly the readings that have one
// (golden files *_anomaly.json), and tags and ecp do not change at all.
func TestEnrichmentGolden(t *testing.T) {
	for _, f := range Formats() {
		t.Run(string(f), func(t *testing.T) {
			plain := canonical(t, mustBuild(t, f, fixture(), opts()))
			doc := mustBuild(t, f, enrichedFixture(), opts())
			got := canonical(t, doc)
			switch f {
			case Tags, ECP:
				if got != plain {
					t.Fatalf("%s changed with enrichment:\n got %s\nwant %s", f, got, plain)
				}
				return
			}
			if n := strings.Count(got, `"anomaly_score"`); n != 3 {
				t.Fatalf("%s has %d enriched readings, want 3: %s", f, n, got)
			}
			if n := strings.Count(got, `"time_to_threshold"`); n != 1 {
				t.Fatalf("%s has %d time_to_threshold, want 1", f, n)
			}
			golden(t, filepath.Join("testdata", string(f)+"_anomaly.json"), []byte(got))
			// Every wire format gives the same document back.
			for _, c := range codec.Formats() {
				enc, err := codec.Encode(doc, codec.EncodeOptions{Format: c})
				if err != nil {
					t.Fatal(err)
				}
				dec, err := codec.Decode(enc, codec.Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if back := canonical(t, dec.Value); back != got {
					t.Errorf("%s/%s does not decode to itself:\n got %s\nwant %s", f, c, back, got)
				}
			}
		})
	}
}

// TestEnrichmentCursor: results are found by index whatever the gaps.
func TestEnrichmentCursor(t *testing.T) {
	rs := []detect.Result{{Index: 2}, {Index: 3}, {Index: 7}}
	for _, tc := range []struct {
		name  string
		probe []int
		found []bool
	}{
		{"every index", []int{0, 1, 2, 3, 4, 5, 6, 7, 8}, []bool{false, false, true, true, false, false, false, true, false}},
		{"sparse probes", []int{3, 7}, []bool{true, true}},
		{"past the end", []int{8, 9}, []bool{false, false}},
	} {
		e := enrichment{rs: rs}
		for k, i := range tc.probe {
			got := e.at(i)
			if (got != nil) != tc.found[k] || (got != nil && got.Index != i) {
				t.Errorf("%s: at(%d) = %+v, want found=%v", tc.name, i, got, tc.found[k])
			}
		}
	}
}

// BenchmarkEnrichedCustom is the custom payload of one 100-register poll
// with and without the anomaly fields, built and JSON-encoded.
func BenchmarkEnrichedCustom(b *testing.B) {
	rs := make([]adapters.Reading, 100)
	res := make([]detect.Result, 100)
	for i := range rs {
		rs[i] = good("plc-1", "r"+strconv.Itoa(i), int64(1000+i), "", t0)
		res[i] = detect.Result{Index: i, AnomalyScore: 0.1, AnomalyThreshold: 0.5, BaselineSamples: 120, DetectionMethods: []string{},
			PredictedNext: float64(1000 + i), Trend: detect.TrendStable, TrendStrength: 0.1, ForecastConfidence: 0.9}
	}
	for _, tc := range []struct {
		name    string
		anomaly []detect.Result
	}{{"plain", nil}, {"enriched", res}} {
		bt := batch.Batch{Endpoint: "plc", Messages: []batch.Message{{Received: t0, Readings: rs}}, Anomaly: tc.anomaly}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				doc, err := BuildCustom(bt, opts())
				if err != nil {
					b.Fatal(err)
				}
				if _, err := codec.Encode(doc, codec.EncodeOptions{Format: codec.FormatJSON}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
