package retention

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// day is one partition's width: a UTC day, TimescaleDB's chunk interval
// too, so both storages drop at the same granularity.
const day = 24 * time.Hour

// Names of the two open-ended partitions; the daily ones are
// readings_pYYYYMMDD after their first day.
const (
	pastName   = "readings_past"
	futureName = "readings_future"
)

// part is one partition of readings and its range [lo, hi); a zero lo is
// MINVALUE, a zero hi MAXVALUE.
type part struct {
	name   string
	lo, hi time.Time
}

func dayName(lo time.Time) string { return "readings_p" + lo.UTC().Format("20060102") }

// layout is readings' partitions: past [MINVALUE, past.hi), days
// contiguous in time order, future [future.lo, MAXVALUE).
type layout struct {
	past   part
	days   []part
	future part
}

// names lists the partitions in time order.
func (l layout) names() []string {
	out := []string{l.past.name}
	for _, d := range l.days {
		out = append(out, d.name)
	}
	return append(out, l.future.name)
}

var boundRE = regexp.MustCompile(`^FOR VALUES FROM \((.+)\) TO \((.+)\)$`)

// parseBound reads pg_get_expr's text of a range partition's bound,
// written with the session in UTC: FOR VALUES FROM ('2026-12-08
// 00:00:00+00') TO (MAXVALUE).
func parseBound(expr string) (lo, hi time.Time, err error) {
	m := boundRE.FindStringSubmatch(expr)
	if m == nil {
		return lo, hi, fmt.Errorf("partition bound %q: not a range bound", expr)
	}
	if lo, err = parseBoundValue(m[1], "MINVALUE"); err != nil {
		return lo, hi, fmt.Errorf("partition bound %q: %w", expr, err)
	}
	if hi, err = parseBoundValue(m[2], "MAXVALUE"); err != nil {
		return lo, hi, fmt.Errorf("partition bound %q: %w", expr, err)
	}
	return lo, hi, nil
}

func parseBoundValue(v, open string) (time.Time, error) {
	if v == open {
		return time.Time{}, nil
	}
	if len(v) < 2 || !strings.HasPrefix(v, "'") || !strings.HasSuffix(v, "'") {
		return time.Time{}, fmt.Errorf("bound value %s: want %s or a quoted time", v, open)
	}
	s := v[1 : len(v)-1]
	for _, f := range []string{"2006-01-02 15:04:05.999999-07", "2006-01-02 15:04:05.999999-07:00"} {
		if t, err := time.Parse(f, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("bound value %s: not a time", v)
}

// newLayout checks that parts cover every time once, from MINVALUE to
// MAXVALUE, and sorts them into a layout. Anything else (a DEFAULT
// partition, a gap, partitions made by hand) is an error: maintenance
// then changes nothing rather than guess.
func newLayout(parts []part) (layout, error) {
	var l layout
	if len(parts) < 2 {
		return l, fmt.Errorf("readings has %d partitions, want at least %s and %s", len(parts), pastName, futureName)
	}
	sort.Slice(parts, func(i, j int) bool {
		return parts[i].lo.IsZero() && !parts[j].lo.IsZero() ||
			!parts[i].lo.IsZero() && !parts[j].lo.IsZero() && parts[i].lo.Before(parts[j].lo)
	})
	first, last := parts[0], parts[len(parts)-1]
	if first.name != pastName || !first.lo.IsZero() || first.hi.IsZero() {
		return l, fmt.Errorf("readings' first partition is %s, want %s from MINVALUE", first.name, pastName)
	}
	if last.name != futureName || !last.hi.IsZero() || last.lo.IsZero() {
		return l, fmt.Errorf("readings' last partition is %s, want %s to MAXVALUE", last.name, futureName)
	}
	for i := 1; i < len(parts); i++ {
		if !parts[i].lo.Equal(parts[i-1].hi) {
			return l, fmt.Errorf("readings partitions are not contiguous: %s ends at %s, %s starts at %s",
				parts[i-1].name, parts[i-1].hi.Format(time.RFC3339), parts[i].name, parts[i].lo.Format(time.RFC3339))
		}
	}
	return layout{past: first, days: parts[1 : len(parts)-1], future: last}, nil
}

// plan is what one maintenance round changes, in the order it does it.
type plan struct {
	// moveFuture: readings_future is detached, its replacement starts at
	// futureLo, and its rows are inserted again (into their new days).
	moveFuture bool
	futureLo   time.Time
	// recyclePast: readings_past is dropped whole (every row in it is
	// older than the retention) and made anew, empty, up to pastHi.
	recyclePast bool
	pastHi      time.Time
	drop        []part
	create      []part
}

func (p plan) empty() bool {
	return !p.moveFuture && !p.recyclePast && len(p.drop) == 0 && len(p.create) == 0
}

// planFor decides a round: days up to ahead days after now's exist; with
// a retention, every partition whose range ends at or before now minus
// the retention goes. pastHasRows says whether readings_past holds any
// row; it is asked only when the past is old enough to go.
func planFor(l layout, now time.Time, retention time.Duration, ahead int, pastHasRows func() (bool, error)) (plan, error) {
	var p plan
	today := now.UTC().Truncate(day)
	wantEnd := today.Add(time.Duration(ahead+1) * day)
	days := append([]part(nil), l.days...)
	var created []part
	if l.future.lo.Before(wantEnd) {
		p.moveFuture, p.futureLo = true, wantEnd
		for lo := l.future.lo; lo.Before(wantEnd); lo = lo.Add(day) {
			d := part{name: dayName(lo), lo: lo, hi: lo.Add(day)}
			days, created = append(days, d), append(created, d)
		}
	}
	newPastHi := l.past.hi
	if retention > 0 {
		cutoff := now.Add(-retention)
		for _, d := range days {
			if !d.hi.After(cutoff) {
				newPastHi = d.hi
			}
		}
		if newPastHi.After(l.past.hi) {
			p.recyclePast = true
		} else if !l.past.hi.After(cutoff) {
			has, err := pastHasRows()
			if err != nil {
				return p, err
			}
			p.recyclePast = has
		}
	}
	p.pastHi = newPastHi
	for _, d := range l.days {
		if !d.hi.After(newPastHi) {
			p.drop = append(p.drop, d)
		}
	}
	for _, d := range created {
		if d.hi.After(newPastHi) {
			// A day the past now covers is not made (an outage longer
			// than the retention): its rows go to the past, dropped next.
			if d.lo.Before(newPastHi) {
				d.lo = newPastHi
			}
			p.create = append(p.create, d)
		}
	}
	return p, nil
}
