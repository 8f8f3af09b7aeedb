package detect

import "testing"

func TestDebug2(t *testing.T) {
	pts, _ := readSeries(csvPath("daily_cycle"))
	d, _ := New(Config{Enabled: true})
	for i, p := range pts[:240] {
		s := d.series[seriesKey{"daily_cycle", "dev"}]
		if s != nil && i >= 180 {
			var sc []float64
			b, n, _ := s.baseline(p.at.Hour(), &sc)
			rs := d.Observe([]Observation{{Metric: "daily_cycle", Device: "dev", Value: p.value, At: p.at}})
			t.Logf("i=%d v=%.3f base=%+v n=%d ring=%d score=%.3f run=%d", i, p.value, b, n, s.slots[p.at.Hour()].win.len(), rs[0].AnomalyScore, len(s.run))
			continue
		}
		d.Observe([]Observation{{Metric: "daily_cycle", Device: "dev", Value: p.value, At: p.at}})
	}
}
