package rollup

import (
	"reflect"
	"testing"
	"time"
)

// TestSplit: whole rollup buckets inside the range and the coverage come
// from the rollups, the daily one first; everything else from raw
// readings; counters take a rollup only of the bucket's own width.
func TestSplit(t *testing.T) {
	d0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(h float64) time.Time { return d0.Add(time.Duration(h * float64(time.Hour))) }
	cov := Coverage{Hourly: Window{at(24), at(24*5 + 3)}, Daily: Window{at(0), at(24 * 4)}}
	span := func(table string, from, to float64) Span { return Span{table, at(from), at(to)} }
	for _, c := range []struct {
		name     string
		cov      Coverage
		from, to float64
		w        time.Duration
		whole    bool
		want     []Span
	}{
		{"nothing rolled up", Coverage{}, 1.5, 30, time.Hour, false, []Span{span(Raw, 1.5, 30)}},
		{"minute buckets", cov, 1.5, 30, time.Minute, false, []Span{span(Raw, 1.5, 30)}},
		{"hours inside hourly", cov, 30.5, 40.25, time.Hour, false,
			[]Span{span(Raw, 30.5, 31), span(Hourly, 31, 40), span(Raw, 40, 40.25)}},
		{"past the watermark", cov, 100, 130, time.Hour, false,
			[]Span{span(Hourly, 100, 123), span(Raw, 123, 130)}},
		{"days: daily, then hourly, then raw", cov, 10, 130, day, false,
			[]Span{span(Raw, 10, 24), span(Daily, 24, 96), span(Hourly, 96, 123), span(Raw, 123, 130)}},
		{"days before hourly start", cov, 0, 20, day, false, []Span{span(Raw, 0, 20)}},
		{"daily alone", cov, 0, 48, day, false, []Span{span(Daily, 0, 48)}},
		{"counter, hour buckets", cov, 30.5, 40.25, time.Hour, true,
			[]Span{span(Raw, 30.5, 31), span(Hourly, 31, 40), span(Raw, 40, 40.25)}},
		{"counter, day buckets skip hourly", cov, 10, 130, day, true,
			[]Span{span(Raw, 10, 24), span(Daily, 24, 96), span(Raw, 96, 130)}},
		{"counter, two-hour buckets", cov, 30, 40, 2 * time.Hour, true, []Span{span(Raw, 30, 40)}},
		{"two-hour buckets combine hours", cov, 30, 40, 2 * time.Hour, false, []Span{span(Hourly, 30, 40)}},
		{"empty range", cov, 5, 5, time.Hour, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.cov.Split(at(c.from), at(c.to), c.w, c.whole)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Split = %v\nwant    %v", got, c.want)
			}
			if UsesRollups(got) != (len(got) > 1 || len(got) == 1 && got[0].Table != Raw) {
				t.Errorf("UsesRollups(%v) = %v", got, UsesRollups(got))
			}
		})
	}
}
