package detect

import "testing"

func TestDebugFP(t *testing.T) {
	for _, rec := range recorded {
		pts, _ := readSeries(csvPath(rec.name))
		d, _ := New(Config{Enabled: true})
		for i, p := range pts {
			rs := d.Observe([]Observation{{Metric: rec.name, Device: "dev", Value: p.value, At: p.at}})
			if len(rs) == 1 && rs[0].Alert != nil && !p.label {
				s := d.series[seriesKey{rec.name, "dev"}]
				t.Logf("%s i=%d v=%.3f score=%.3f methods=%v samples=%d counter=%v", rec.name, i, p.value, rs[0].AnomalyScore, rs[0].DetectionMethods, rs[0].BaselineSamples, s.isCounter())
			}
		}
	}
}
