package simulation

import (
	"math"
	"slices"
	"testing"
)

// frames runs a fresh generator of the scenario for n polls.
func frames(t *testing.T, name string, seed uint64, n int) []Frame {
	t.Helper()
	sc, ok := Lookup(name)
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	g := sc.NewGenerator(seed)
	out := make([]Frame, n)
	for i := range out {
		out[i] = g.Next()
	}
	return out
}

func value(f Frame, signal string) (float64, bool) {
	i := sampleOf(f, signal)
	if i < 0 || f.Samples[i].Code != "" {
		return 0, false
	}
	return f.Samples[i].Value, true
}

func meanOf(fs []Frame, signal string) float64 {
	sum, n := 0.0, 0
	for _, f := range fs {
		if v, ok := value(f, signal); ok {
			sum += v
			n++
		}
	}
	return sum / float64(n)
}

func countBad(fs []Frame) (bad int, codes map[string]int) {
	codes = map[string]int{}
	for _, f := range fs {
		for _, s := range f.Samples {
			if s.Code != "" {
				bad++
				codes[s.Code]++
			}
		}
	}
	return bad, codes
}

// TestScenarioGenerators checks each scenario's signal shape over 400
// polls of seed 7.
func TestScenarioGenerators(t *testing.T) {
	const n = 400
	for _, tt := range []struct {
		scenario string
		check    func(t *testing.T, fs []Frame)
	}{
		{"steady", func(t *testing.T, fs []Frame) {
			if bad, _ := countBad(fs); bad != 0 {
				t.Errorf("%d BAD samples", bad)
			}
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, f := range fs {
				if f.Down {
					t.Fatal("steady went down")
				}
				v, _ := value(f, "temperature")
				lo, hi = min(lo, v), max(hi, v)
			}
			// A 4 C sine around 21 with 0.15 C noise.
			if lo < 16 || hi > 26 || hi-lo < 7 {
				t.Errorf("temperature spans %.2f..%.2f, want a 4 C sine around 21", lo, hi)
			}
			if m := meanOf(fs[:6*sinePeriod], "temperature"); math.Abs(m-21) > 0.3 {
				t.Errorf("mean temperature over 6 periods %.3f, want 21", m)
			}
		}},
		{"drift", func(t *testing.T, fs []Frame) {
			// Whole sine periods cancel, so the means differ by the ramp.
			first, later := meanOf(fs[:sinePeriod], "temperature"), meanOf(fs[5*sinePeriod:6*sinePeriod], "temperature")
			if d := later - first; math.Abs(d-rampPerPoll*5*sinePeriod) > 0.3 {
				t.Errorf("temperature rose %.3f over %d polls, want %.1f", d, 5*sinePeriod, rampPerPoll*5*sinePeriod)
			}
			if p1, p2 := meanOf(fs[:sinePeriod*3/2], "pressure"), meanOf(fs[3*sinePeriod:9*sinePeriod/2], "pressure"); math.Abs(p2-p1) > 0.01 {
				t.Errorf("pressure moved %.4f: it should stay steady", p2-p1)
			}
		}},
		{"fault", func(t *testing.T, fs []Frame) {
			if c := fs[0].Samples; !slices.ContainsFunc(c, func(s Sample) bool { return s.Code != "" }) {
				t.Errorf("the first poll has no BAD sample: %+v", c)
			}
			bad, codes := countBad(fs)
			if bad != n/faultBadEvery {
				t.Errorf("%d BAD samples, want one every %d polls (%d)", bad, faultBadEvery, n/faultBadEvery)
			}
			for c := range codes {
				if !slices.Contains(faultCodes, c) {
					t.Errorf("quality code %q is none of %v", c, faultCodes)
				}
			}
			if len(codes) < 2 {
				t.Errorf("codes %v: want several", codes)
			}
			// Steps: the mean of a step's polls sits on one of the levels.
			levels := map[float64]bool{}
			for i := 0; i+faultStepEvery <= n; i += faultStepEvery {
				m := meanOf(fs[i:i+faultStepEvery], "temperature") - 21
				nearest := slices.MinFunc(faultLevels, func(a, b float64) int {
					return int(math.Copysign(1, math.Abs(m-a)-math.Abs(m-b)))
				})
				if math.Abs(m-nearest) > 4.5 { // within the sine's amplitude
					t.Errorf("polls %d..%d average %.2f above base, no level of %v", i, i+faultStepEvery, m, faultLevels)
				}
				levels[nearest] = true
			}
			if len(levels) < 3 {
				t.Errorf("levels seen %v: want step changes", levels)
			}
		}},
		{"outage", func(t *testing.T, fs []Frame) {
			var downs []int
			for i, f := range fs {
				if f.Down {
					downs = append(downs, i)
					if len(f.Samples) != 0 {
						t.Errorf("poll %d is down with samples", i)
					}
				}
			}
			if len(downs) < n/(outageUpMin+outageUpSpread) {
				t.Fatalf("went down at polls %v: too rarely", downs)
			}
			prev := -1
			for _, d := range downs {
				if up := d - prev - 1; up < outageUpMin || up >= outageUpMin+outageUpSpread {
					t.Errorf("answered %d polls before going down at %d, want %d..%d", up, d, outageUpMin, outageUpMin+outageUpSpread-1)
				}
				prev = d
			}
			if bad, _ := countBad(fs); bad != 0 {
				t.Errorf("%d BAD samples: an outage is a lost device, not bad values", bad)
			}
		}},
		{"schema-drift", func(t *testing.T, fs []Frame) {
			for i, f := range fs {
				_, has := value(f, vanishingField)
				if has != (i < vanishAfter) {
					t.Fatalf("poll %d: %s present = %v, want it until poll %d only", i, vanishingField, has, vanishAfter)
				}
				if _, ok := value(f, "temperature"); !ok {
					t.Fatalf("poll %d lacks temperature", i)
				}
			}
		}},
	} {
		t.Run(tt.scenario, func(t *testing.T) { tt.check(t, frames(t, tt.scenario, 7, n)) })
	}
}

// TestScenariosAreDeterministic: a seed repeats a run exactly; another
// seed gives other values.
func TestScenariosAreDeterministic(t *testing.T) {
	for _, sc := range Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			a, b, c := frames(t, sc.Name, 42, 200), frames(t, sc.Name, 42, 200), frames(t, sc.Name, 43, 200)
			if !slices.EqualFunc(a, b, frameEqual) {
				t.Error("two runs of seed 42 differ")
			}
			if slices.EqualFunc(a, c, frameEqual) {
				t.Error("seeds 42 and 43 gave the same run")
			}
		})
	}
}

func frameEqual(a, b Frame) bool { return a.Down == b.Down && slices.Equal(a.Samples, b.Samples) }

func TestCatalogue(t *testing.T) {
	if got, want := Names(), []string{"steady", "drift", "fault", "outage", "schema-drift"}; !slices.Equal(got, want) {
		t.Errorf("scenarios %v, want %v", got, want)
	}
	for _, sc := range Scenarios {
		if sc.Description == "" || sc.Devices < 1 || sc.PollInterval <= 0 || len(sc.Signals) == 0 {
			t.Errorf("scenario %s is incomplete: %+v", sc.Name, sc)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup found an unknown scenario")
	}
}
