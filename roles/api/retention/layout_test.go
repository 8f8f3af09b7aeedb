package retention

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseBound(t *testing.T) {
	d := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		expr   string
		lo, hi time.Time
		err    string
	}{
		{expr: "FOR VALUES FROM (MINVALUE) TO ('2026-12-08 00:00:00+00')", hi: d("2026-12-08T00:00:00Z")},
		{expr: "FOR VALUES FROM ('2026-12-08 00:00:00+00') TO ('2026-12-09 00:00:00+00')",
			lo: d("2026-12-08T00:00:00Z"), hi: d("2026-12-09T00:00:00Z")},
		{expr: "FOR VALUES FROM ('2026-12-16 00:00:00+00') TO (MAXVALUE)", lo: d("2026-12-16T00:00:00Z")},
		{expr: "FOR VALUES FROM ('2026-12-16 01:30:00.25+05:30') TO (MAXVALUE)", lo: d("2026-12-15T20:00:00.25Z")},
		{expr: "DEFAULT", err: "not a range bound"},
		{expr: "FOR VALUES FROM (MAXVALUE) TO (MINVALUE)", err: "want MINVALUE"},
		{expr: "FOR VALUES FROM ('yesterday') TO (MAXVALUE)", err: "not a time"},
	} {
		lo, hi, err := parseBound(c.expr)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want one saying %q", c.expr, err, c.err)
			}
			continue
		}
		if err != nil || !lo.Equal(c.lo) || !hi.Equal(c.hi) {
			t.Errorf("%s = %s, %s, %v; want %s, %s", c.expr, lo, hi, err, c.lo, c.hi)
		}
	}
}

// testLayout is past up to the first day, n days from first, and the
// future after them.
func testLayout(first time.Time, n int) []part {
	parts := []part{{name: pastName, hi: first}}
	for i := range n {
		lo := first.Add(time.Duration(i) * day)
		parts = append(parts, part{name: dayName(lo), lo: lo, hi: lo.Add(day)})
	}
	return append(parts, part{name: futureName, lo: first.Add(time.Duration(n) * day)})
}

func TestNewLayout(t *testing.T) {
	d0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	good := testLayout(d0, 3)
	shuffled := []part{good[3], good[0], good[4], good[2], good[1]}
	l, err := newLayout(shuffled)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"readings_past", "readings_p20261201", "readings_p20261202", "readings_p20261203", "readings_future"}
	if got := l.names(); !reflect.DeepEqual(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	gap := append([]part(nil), good...)
	gap = append(gap[:2], gap[3:]...)
	for name, c := range map[string]struct {
		parts []part
		err   string
	}{
		"gap":       {gap, "not contiguous: readings_p20261201 ends at 2026-12-02T00:00:00Z, readings_p20261203 starts"},
		"no future": {good[:4], "last partition is readings_p20261203"},
		"no past":   {good[1:], "first partition is readings_p20261201"},
		"alone":     {good[:1], "has 1 partitions"},
	} {
		if _, err := newLayout(c.parts); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: err %v, want one saying %q", name, err, c.err)
		}
	}
}

func TestPlanFor(t *testing.T) {
	d0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(days int, hours time.Duration) time.Time {
		return d0.Add(time.Duration(days)*day + hours*time.Hour)
	}
	names := func(ps []part) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.name)
		}
		return out
	}
	type want struct {
		moveFuture  bool
		futureLo    time.Time
		recyclePast bool
		pastHi      time.Time
		drop        []string
		create      []string
	}
	for _, c := range []struct {
		name      string
		layout    []part
		now       time.Time
		retention time.Duration
		ahead     int
		pastRows  bool
		want      want
	}{
		{name: "current", layout: testLayout(d0, 8), now: at(0, 10), ahead: 7,
			want: want{pastHi: d0}},
		{name: "a day later", layout: testLayout(d0, 8), now: at(1, 1), ahead: 7,
			want: want{moveFuture: true, futureLo: at(9, 0), pastHi: d0, create: []string{"readings_p20261209"}}},
		{name: "after an outage", layout: testLayout(d0, 8), now: at(4, 23), ahead: 7,
			want: want{moveFuture: true, futureLo: at(12, 0), pastHi: d0,
				create: []string{"readings_p20261209", "readings_p20261210", "readings_p20261211", "readings_p20261212"}}},
		{name: "retention drops whole days", layout: testLayout(d0, 8), now: at(3, 6), retention: 48 * time.Hour, ahead: 7,
			want: want{moveFuture: true, futureLo: at(11, 0), recyclePast: true, pastHi: at(1, 0),
				drop:   []string{"readings_p20261201"},
				create: []string{"readings_p20261209", "readings_p20261210", "readings_p20261211"}}},
		{name: "a day straddling the cut stays", layout: testLayout(d0, 8), now: at(2, 23), retention: 48 * time.Hour, ahead: 5,
			want: want{pastHi: d0}},
		{name: "an empty old past stays", layout: testLayout(d0, 8), now: at(1, 1), retention: 24 * time.Hour, ahead: 5,
			want: want{pastHi: d0}},
		{name: "late rows in an old past go", layout: testLayout(d0, 8), now: at(0, 1), retention: time.Hour, ahead: 5, pastRows: true,
			want: want{recyclePast: true, pastHi: d0}},
		{name: "recent past is kept with its rows", layout: testLayout(d0, 8), now: at(0, 1), retention: 2 * time.Hour, ahead: 5, pastRows: true,
			want: want{pastHi: d0}},
		{name: "outage longer than the retention", layout: testLayout(d0, 2), now: at(10, 12), retention: 72 * time.Hour, ahead: 1,
			want: want{moveFuture: true, futureLo: at(12, 0), recyclePast: true, pastHi: at(7, 0),
				drop:   []string{"readings_p20261201", "readings_p20261202"},
				create: []string{"readings_p20261208", "readings_p20261209", "readings_p20261210", "readings_p20261211", "readings_p20261212"}}},
		{name: "no retention keeps all", layout: testLayout(d0, 2), now: at(400, 0), ahead: 0,
			want: want{moveFuture: true, futureLo: at(401, 0), pastHi: d0,
				create: names(testLayout(at(2, 0), 399)[1:400])}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := newLayout(c.layout)
			if err != nil {
				t.Fatal(err)
			}
			asked := false
			p, err := planFor(l, c.now, c.retention, c.ahead, func() (bool, error) { asked = true; return c.pastRows, nil })
			if err != nil {
				t.Fatal(err)
			}
			got := want{moveFuture: p.moveFuture, futureLo: p.futureLo, recyclePast: p.recyclePast, pastHi: p.pastHi,
				drop: names(p.drop), create: names(p.create)}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("plan\n got %+v\nwant %+v", got, c.want)
			}
			if c.pastRows && c.want.recyclePast && !asked {
				t.Errorf("readings_past's rows were not looked at")
			}
		})
	}
}
