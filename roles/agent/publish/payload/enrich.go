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
	methods := make([]any, len(r.DetectionMethods))
	for i, m := range r.DetectionMethods {
		methods[i] = m
	}
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

func finite(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return f
}
