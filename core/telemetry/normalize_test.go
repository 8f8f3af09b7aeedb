package telemetry

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
)

// normalizeReference is the plain definition: a stable sort by key, then
// the last row of every run of equal keys.
func normalizeReference(rows []Row) []Row {
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(a, b Row) int { return CompareKey(&a, &b) })
	var out []Row
	for i := range rows {
		if i+1 < len(rows) && CompareKey(&rows[i], &rows[i+1]) == 0 {
			continue
		}
		out = append(out, rows[i])
	}
	return out
}

// randomRowsOver makes n rows over few agents and times and the given
// number of metric names, so that duplicate keys are common; each row's
// value is its input position. Times differ by seconds or by nanoseconds,
// and some are in another zone.
func randomRowsOver(rnd *rand.Rand, n, metrics int) []Row {
	zone := time.FixedZone("X", 3600)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := make([]Row, n)
	for i := range rows {
		var a codec.UUID
		a[0] = byte(rnd.IntN(3))
		v := float64(i)
		at := base.Add(time.Duration(rnd.IntN(4))*time.Second + time.Duration(rnd.IntN(2)))
		if rnd.IntN(3) == 0 {
			at = at.In(zone)
		}
		rows[i] = Row{AgentUUID: a, MetricName: "d." + strconv.Itoa(rnd.IntN(metrics)), Time: at, Value: &v}
	}
	return rows
}

func TestNormalizeMatchesReference(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 11))
	for _, n := range []int{0, 1, 2, 3, 10, 61, 500, 5000} {
		for k := range 20 {
			rows := randomRowsOver(rnd, n, []int{1, 5, 100, 10000}[k%4])
			want := normalizeReference(rows)
			got := Normalize(slices.Clone(rows))
			if len(got) != len(want) {
				t.Fatalf("n=%d: %d rows, want %d", n, len(got), len(want))
			}
			for i := range got {
				if CompareKey(&got[i], &want[i]) != 0 || *got[i].Value != *want[i].Value {
					t.Fatalf("n=%d: row %d = %v %s %s %g, want %v %s %s %g", n, i,
						got[i].AgentUUID[0], got[i].MetricName, got[i].Time, *got[i].Value,
						want[i].AgentUUID[0], want[i].MetricName, want[i].Time, *want[i].Value)
				}
			}
		}
	}
}

// BenchmarkNormalize sorts one ingest batch: 1000 messages of 50
// readings from 40 devices, as the benchmark profile reads them.
func BenchmarkNormalize(b *testing.B) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var in []Row
	for m := range 1000 {
		var a codec.UUID
		a[0], a[1] = byte(m%10), 0x42
		dev := "dev" + strconv.Itoa(m%4)
		for r := range 50 {
			v := float64(r)
			in = append(in, Row{AgentUUID: a, MetricName: dev + ".r" + strconv.Itoa(r), Time: base.Add(time.Duration(m) * time.Millisecond), Value: &v})
		}
	}
	rows := make([]Row, len(in))
	b.ReportAllocs()
	for b.Loop() {
		copy(rows, in)
		Normalize(rows)
	}
}
