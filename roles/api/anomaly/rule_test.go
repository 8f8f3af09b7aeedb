package anomaly

import (
	"math"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func TestRuleInputNormalize(t *testing.T) {
	name := ptr("hot")
	tests := []struct {
		name string
		in   RuleInput
		want string // a field the error names; "" for a valid rule
	}{
		{"threshold", RuleInput{Name: name, Type: TypeThreshold, Condition: Condition{Metric: "temp*", Op: "above", Threshold: ptr(80.0)}}, ""},
		{"zscore", RuleInput{Name: name, Type: TypeZScore, Condition: Condition{Metric: "plc.t", K: ptr(3.0), Window: "5m"}}, ""},
		{"rate", RuleInput{Name: name, Type: TypeRate, Condition: Condition{Metric: "flow", Rate: ptr(5.0), Per: "minute", Window: "1m"}}, ""},
		{"correlation", RuleInput{Name: name, Type: TypeCorrelation, Condition: Condition{Window: "5m"}, Conditions: []Condition{
			{Type: TypeRate, Metric: "temp*", Op: "rising", Rate: ptr(1.0), Per: "minute", Window: "1m"},
			{Type: TypeThreshold, Metric: "flow*", Op: "below", Threshold: ptr(10.0)}}}, ""},
		{"no name", RuleInput{Type: TypeThreshold, Condition: Condition{Metric: "t", Op: "above", Threshold: ptr(1.0)}}, "name"},
		{"unknown type", RuleInput{Name: name, Type: "magic", Condition: Condition{Metric: "t"}}, "type"},
		{"no type", RuleInput{Name: name, Condition: Condition{Metric: "t"}}, "type"},
		{"no metric", RuleInput{Name: name, Type: TypeThreshold, Condition: Condition{Op: "above", Threshold: ptr(1.0)}}, "metric"},
		{"bad glob", RuleInput{Name: name, Type: TypeThreshold, Condition: Condition{Metric: "t[", Op: "above", Threshold: ptr(1.0)}}, "metric"},
		{"bad op", RuleInput{Name: name, Type: TypeThreshold, Condition: Condition{Metric: "t", Op: "over", Threshold: ptr(1.0)}}, "op"},
		{"no threshold", RuleInput{Name: name, Type: TypeThreshold, Condition: Condition{Metric: "t", Op: "above"}}, "threshold"},
		{"bad window", RuleInput{Name: name, Type: TypeZScore, Condition: Condition{Metric: "t", K: ptr(3.0), Window: "soon"}}, "window"},
		{"window too long", RuleInput{Name: name, Type: TypeZScore, Condition: Condition{Metric: "t", K: ptr(3.0), Window: "48h"}}, "window"},
		{"no k", RuleInput{Name: name, Type: TypeZScore, Condition: Condition{Metric: "t", Window: "1m"}}, "k"},
		{"bad per", RuleInput{Name: name, Type: TypeRate, Condition: Condition{Metric: "t", Rate: ptr(1.0), Per: "hour", Window: "1m"}}, "per"},
		{"bad severity", RuleInput{Name: name, Type: TypeThreshold, Severity: "dire", Condition: Condition{Metric: "t", Op: "above", Threshold: ptr(1.0)}}, "severity"},
		{"bad fleet id", RuleInput{Name: name, Type: TypeThreshold, Scope: &Scope{FleetID: "north"}, Condition: Condition{Metric: "t", Op: "above", Threshold: ptr(1.0)}}, "scope.fleetId"},
		{"bad agent id", RuleInput{Name: name, Type: TypeThreshold, Scope: &Scope{AgentUUID: "x"}, Condition: Condition{Metric: "t", Op: "above", Threshold: ptr(1.0)}}, "scope.agentUuid"},
		{"one condition", RuleInput{Name: name, Type: TypeCorrelation, Condition: Condition{Window: "5m"}, Conditions: []Condition{
			{Type: TypeThreshold, Metric: "t", Op: "above", Threshold: ptr(1.0)}}}, "conditions"},
		{"bad condition", RuleInput{Name: name, Type: TypeCorrelation, Condition: Condition{Window: "5m"}, Conditions: []Condition{
			{Type: TypeThreshold, Metric: "t", Op: "above", Threshold: ptr(1.0)}, {Type: TypeRate, Metric: "f", Rate: ptr(1.0), Per: "minute"}}}, "conditions[1].window"},
		{"conditions on a threshold", RuleInput{Name: name, Type: TypeThreshold, Condition: Condition{Metric: "t", Op: "above", Threshold: ptr(1.0)},
			Conditions: []Condition{{Type: TypeThreshold}}}, "conditions"},
		{"bad recovery", RuleInput{Name: name, Type: TypeThreshold, RecoverAfter: "-1s", Condition: Condition{Metric: "t", Op: "above", Threshold: ptr(1.0)}}, "recoverAfter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.in.normalize()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if r.RecoverAfter != DefaultRecoverAfter.String() || r.Severity != SeverityWarning || !r.Enabled {
					t.Errorf("defaults not applied: %+v", r)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want+":") {
				t.Fatalf("error %v, want one naming %q", err, tt.want)
			}
		})
	}
}

func TestMatchMetric(t *testing.T) {
	tests := []struct {
		pattern, metric, reading string
		want                     bool
	}{
		{"temp*", "plc1.temperature", "temperature", true},
		{"plc1.temp*", "plc1.temperature", "temperature", true},
		{"plc2.*", "plc1.temperature", "temperature", false},
		{"flow", "plc1.temperature", "temperature", false},
		{"*", "plc1.x", "x", true},
	}
	for _, tt := range tests {
		if got := matchMetric(tt.pattern, tt.metric, tt.reading); got != tt.want {
			t.Errorf("matchMetric(%q, %q) = %v, want %v", tt.pattern, tt.metric, got, tt.want)
		}
	}
}

func TestDetectors(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	type sample struct {
		at    time.Duration
		v     float64
		fired bool
	}
	tests := []struct {
		name    string
		c       Condition
		samples []sample
	}{
		{"threshold above", Condition{Type: TypeThreshold, Op: "above", Threshold: ptr(10.0)},
			[]sample{{0, 9, false}, {1, 10, false}, {2, 10.5, true}}},
		{"threshold below", Condition{Type: TypeThreshold, Op: "below", Threshold: ptr(10.0)},
			[]sample{{0, 9, true}, {1, 11, false}}},
		{"zscore waits for its samples", Condition{Type: TypeZScore, K: ptr(3.0), Window: "1m", MinSamples: 4},
			[]sample{{0, 10, false}, {1, 11, false}, {2, 10, false}, {3, 100, false}}},
		{"zscore spike", Condition{Type: TypeZScore, K: ptr(3.0), Window: "1m", MinSamples: 4},
			[]sample{{0, 10, false}, {1, 11, false}, {2, 10, false}, {3, 11, false}, {4, 30, true}, {5, 10.5, false}}},
		{"zscore window forgets", Condition{Type: TypeZScore, K: ptr(3.0), Window: "10s", MinSamples: 2},
			[]sample{{0, 10, false}, {1, 1000, false}, {30, 10, false}, {31, 11, false}, {32, 30, true}}},
		{"rate rising per minute", Condition{Type: TypeRate, Op: "rising", Rate: ptr(60.0), Per: "minute", Window: "10s"},
			[]sample{{0, 0, false}, {1, 0.5, false}, {2, 3, true}, {3, 3, true}, {20, 3, false}}},
		{"rate falling", Condition{Type: TypeRate, Op: "falling", Rate: ptr(1.0), Per: "second", Window: "5s"},
			[]sample{{0, 10, false}, {1, 12, false}, {2, 5, true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := compile(tt.c)
			var s series
			for i, sm := range tt.samples {
				fired, score := d.observe(&s, t0.Add(sm.at*time.Second), sm.v, true)
				if fired != sm.fired {
					t.Errorf("sample %d (%g): fired %v (score %g), want %v", i, sm.v, fired, score, sm.fired)
				}
				if math.IsNaN(score) {
					t.Errorf("sample %d: NaN score", i)
				}
			}
		})
	}
}

// TestSeriesBounded: a window never keeps more than MaxWindowSamples, and
// its running statistics match a direct computation.
func TestSeriesBounded(t *testing.T) {
	var s series
	t0 := time.Unix(0, 0)
	for i := range 3 * MaxWindowSamples {
		s.push(t0.Add(time.Duration(i)*time.Millisecond), 1000+float64(i%7), true)
	}
	if s.n != MaxWindowSamples || len(s.values) != MaxWindowSamples {
		t.Fatalf("kept %d samples in %d slots, want %d", s.n, len(s.values), MaxWindowSamples)
	}
	var sum, sq float64
	for i := range s.n {
		_, v := s.at(i)
		sum += v
	}
	mean := sum / float64(s.n)
	for i := range s.n {
		_, v := s.at(i)
		sq += (v - mean) * (v - mean)
	}
	gotMean, gotStd := s.stats()
	if math.Abs(gotMean-mean) > 1e-9 || math.Abs(gotStd-math.Sqrt(sq/float64(s.n))) > 1e-9 {
		t.Errorf("stats %g±%g, want %g±%g", gotMean, gotStd, mean, math.Sqrt(sq/float64(s.n)))
	}
	// Without room to grow, a full window keeps its length.
	var small series
	for i := range 100 {
		small.push(t0.Add(time.Duration(i)*time.Millisecond), float64(i), i < 8)
	}
	if small.n != 8 || len(small.values) != 8 {
		t.Errorf("a window denied growth holds %d samples in %d slots, want 8", small.n, len(small.values))
	}
	if first, _ := small.at(0); !first.Equal(t0.Add(92 * time.Millisecond)) {
		t.Errorf("oldest sample kept %s, want the 92nd", first)
	}
}

func TestSign(t *testing.T) {
	// A fixed vector: echo -n '1700000000.{"a":1}' | openssl dgst -sha256 -hmac 0123456789abcdef
	got := Sign("0123456789abcdef", 1700000000, []byte(`{"a":1}`))
	if want := "sha256=9eb18f493f8ec135d9eb2dad817c369bb4e9cbfa818657897a7437c1cd8c3a23"; got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
	if Sign("0123456789abcdef", 1700000001, []byte(`{"a":1}`)) == got {
		t.Error("the timestamp is not part of the signed string")
	}
}
