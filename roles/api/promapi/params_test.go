package promapi

import (
	"math"
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Time
		ok   bool
		err  bool
	}{
		{"", time.Time{}, false, false},
		{minTimeFormatted, time.Time{}, false, false},
		{maxTimeFormatted, time.Time{}, false, false},
		{"1710151200", time.Date(2024, 3, 11, 10, 0, 0, 0, time.UTC), true, false},
		{"1710151200.1234", time.Date(2024, 3, 11, 10, 0, 0, 123e6, time.UTC), true, false},
		{"2024-03-11T10:00:00.5+01:00", time.Date(2024, 3, 11, 9, 0, 0, 5e8, time.UTC), true, false},
		{"NaN", time.Time{}, false, true},
		{"1e300", time.Time{}, false, true},
		{"yesterday", time.Time{}, false, true},
	} {
		got, ok, err := parseTime("time", tt.in)
		if (err != nil) != tt.err || ok != tt.ok || !got.Equal(tt.want) {
			t.Errorf("parseTime(%q) = %s, %v, %v; want %s, %v, error %v", tt.in, got, ok, err, tt.want, tt.ok, tt.err)
		}
	}
}

func TestParseStep(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"15", 15 * time.Second}, {"0.5", 500 * time.Millisecond}, {"1m30s", 90 * time.Second}, {"1h", time.Hour},
		{"250ms", 250 * time.Millisecond}, {"2w", 14 * 24 * time.Hour},
		{"", 0}, {"0", 0}, {"-1", 0}, {"1m1h", 0}, {"5x", 0}, {"Inf", 0}, {"1e30", 0}, {"100y", 100 * 365 * 24 * time.Hour}, {"101y", 0}, {" 5m", 0}, {"5m ", 0}, {"5m#", 0},
	} {
		got, err := parseStep("step", tt.in)
		if got != tt.want || (err != nil) != (tt.want == 0) {
			t.Errorf("parseStep(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestSampleJSON(t *testing.T) {
	for _, tt := range []struct {
		s    sample
		want string
	}{
		{sample{time.Unix(1710151200, 0), 1.5}, `[1710151200,"1.5"]`},
		{sample{time.UnixMicro(1710151200_050000), -2}, `[1710151200.05,"-2"]`},
		{sample{time.UnixMicro(1710151200_000007), 1e21}, `[1710151200.000007,"1000000000000000000000"]`},
		{sample{time.UnixMicro(-1_500000), math.NaN()}, `[-1.5,"NaN"]`},
		{sample{time.Unix(0, 0), math.Inf(-1)}, `[0,"-Inf"]`},
	} {
		b, _ := tt.s.MarshalJSON()
		if string(b) != tt.want {
			t.Errorf("%v: %s, want %s", tt.s, b, tt.want)
		}
	}
}
