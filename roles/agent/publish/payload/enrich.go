package payload

import (
	"math"

	"github.com/edgeplat/edgeplat/roles/agent/anomaly/detect"
)

// enrichment walks a batch's anomaly results alongside its readings:
// results are in reading order, so one cursor finds each reading's result
// without a lookup table.
type enrichment struct {
	rs   []detect.Result
	next int
}

// at returns the result of the reading at flat index i, if it has one.
func (e *enrichment) at(i int) *detect.Result {
	for e.next < len(e.rs) && e.rs[e.next].Index < i {
		e.next++
	}
	if e.next < len(e.rs) && e.rs[e.next].Index == i {
		return &e.rs[e.next]
	}
	return nil
}

// addEnrichment writes the anomaly enrichment fields of docs/agent-payloads.md
// into a custom reading or an ml feature. Values are the types codec.Decode
// gives back (float64, int64, []any, map[string]any), so the document
// decodes to itself; a non-finite number, which JSON cannot carry, is null.
func addEnrichment(out map[string]any, r *detect.Result) {
	methods := methodList(r.DetectionMethods)
	out["anomaly_score"] = finite(r.AnomalyScore)
	out["anomaly_threshold"] = finite(r.AnomalyThreshold)
	out["baseline_samples"] = r.BaselineSamples
	out["detection_methods"] = methods
	out["predicted_next"] = finite(r.PredictedNext)
	out["trend"] = r.Trend
	out["trend_strength"] = finite(r.TrendStrength)
	out["forecast_confidence"] = finite(r.ForecastConfidence)
	if tt := r.TimeToThreshold; tt != nil {
		out["time_to_threshold"] = map[string]any{
			"threshold":         finite(tt.Threshold),
			"estimated_seconds": finite(tt.EstimatedSeconds),
			"confidence":        finite(tt.Confidence),
		}
	}
}

// enrichedKeys is the number of keys addEnrichment adds for r.
func enrichedKeys(r *detect.Result) int {
	switch {
	case r == nil:
		return 0
	case r.TimeToThreshold == nil:
		return 8
	}
	return 9
}

// methodLists are the detection_methods values of every combination of
// the detector's methods, built once: documents only read them, and most
// readings carry the empty list.
var methodLists = func() map[string][]any {
	names := []string{detect.MethodZScore, detect.MethodMAD, detect.MethodRate}
	out := map[string][]any{}
	for mask := range 1 << len(names) {
		key, list := "", []any{}
		for i, n := range names {
			if mask&(1<<i) != 0 {
				key += n + ","
				list = append(list, n)
			}
		}
		out[key] = list
	}
	return out
}()

// methodList is ms as a document value, shared when it is one of the
// detector's combinations.
func methodList(ms []string) []any {
	switch len(ms) {
	case 0:
		return methodLists[""]
	case 1:
		if l, ok := methodLists[ms[0]+","]; ok {
			return l
		}
	}
	key := ""
	for _, m := range ms {
		key += m + ","
	}
	if l, ok := methodLists[key]; ok {
		return l
	}
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

func finite(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return f
}
