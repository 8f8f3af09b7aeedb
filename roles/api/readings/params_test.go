package readings

import (
	"encoding/json"
	"errors"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	tests := []struct {
		in   string
		want string // RFC 3339 in UTC, or "" for an error
		msg  string // part of the error message
	}{
		{"2024-03-10T10:00:00Z", "2024-03-10T10:00:00Z", ""},
		{"2024-03-10T11:00:00+01:00", "2024-03-10T10:00:00Z", ""},
		{"2024-03-10T10:00:00.123456789Z", "2024-03-10T10:00:00.123456Z", ""}, // truncated to µs
		{"1710064800000", "2024-03-10T10:00:00Z", ""},
		{"0", "1970-01-01T00:00:00Z", ""},
		{"-1000", "1969-12-31T23:59:59Z", ""},
		{"0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z", ""},
		{"9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59.999999Z", ""},
		{"2024-03-10", "", "must be an RFC 3339 time"},
		{"2024-03-10T10:00:00", "", "must be an RFC 3339 time"},
		{"1710064800000.5", "", "must be an RFC 3339 time"},
		{"+1710064800000", "", "must be an RFC 3339 time"},
		{"-", "", "must be an RFC 3339 time"},
		{"99999999999999999", "", "out of range for Unix milliseconds"},
		{"-99999999999999999", "", "out of range for Unix milliseconds"},
		{"99999999999999999999999", "", "out of range for Unix milliseconds"},
		{"0000-12-31T23:00:00Z", "", "must be between years 1 and 9999"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseTime("start", tt.in)
			if tt.want == "" {
				var pe *paramError
				if !errors.As(err, &pe) || pe.param != "start" || !strings.HasPrefix(pe.msg, "start ") || !strings.Contains(pe.msg, tt.msg) {
					t.Fatalf("parseTime(%q) = %v, %v; want an error about start containing %q", tt.in, got, err, tt.msg)
				}
				return
			}
			if err != nil || formatTime(got) != tt.want || got.Location() != time.UTC {
				t.Fatalf("parseTime(%q) = %v, %v; want %s UTC", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseJSONTime(t *testing.T) {
	tests := []struct {
		raw  string
		want string // "" with ok false: absent; "error": an error
	}{
		{``, ""},
		{`null`, ""},
		{`"2024-03-10T10:00:00Z"`, "2024-03-10T10:00:00Z"},
		{`"1710064800000"`, "2024-03-10T10:00:00Z"},
		{`1710064800000`, "2024-03-10T10:00:00Z"},
		{`1.7100648e12`, "2024-03-10T10:00:00Z"},
		{`1710064800000.5`, "error"},
		{`true`, "error"},
		{`{}`, "error"},
		{`"\u0000"`, "error"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, ok, err := parseJSONTime("end", json.RawMessage(tt.raw))
			switch tt.want {
			case "":
				if ok || err != nil {
					t.Fatalf("= %v, %v, %v; want absent", got, ok, err)
				}
			case "error":
				var pe *paramError
				if !errors.As(err, &pe) || pe.param != "end" || ok {
					t.Fatalf("= %v, %v, %v; want an error about end", got, ok, err)
				}
			default:
				if !ok || err != nil || formatTime(got) != tt.want {
					t.Fatalf("= %v, %v, %v; want %s", got, ok, err, tt.want)
				}
			}
		})
	}
}

func TestParseStep(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration // 0: an error
	}{
		{"1m", time.Minute},
		{"30s", 30 * time.Second},
		{"250ms", 250 * time.Millisecond},
		{"1h30m", 90 * time.Minute},
		{"1d", day},
		{"2w", 14 * day},
		{"1y", 365 * day},
		{"1h1m1s1ms", time.Hour + time.Minute + time.Second + time.Millisecond},
		{"0s", -1}, // valid syntax; the query package refuses the value
		{"", 0},
		{"m", 0},
		{"1", 0},
		{"1.5h", 0},
		{"1x", 0},
		{"-1m", 0},
		{"1m1h", 0}, // smallest unit first
		{"1m1m", 0}, // a unit twice
		{"1h ", 0},
		{"1ms1s", 0},
		{"99999999999y", 0},
		{"300000d300000h", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseStep("step", tt.in)
			switch {
			case tt.want == -1:
				if err != nil || got != 0 {
					t.Fatalf("parseStep(%q) = %v, %v; want 0", tt.in, got, err)
				}
			case tt.want == 0:
				var pe *paramError
				if !errors.As(err, &pe) || !strings.HasPrefix(pe.msg, "step ") {
					t.Fatalf("parseStep(%q) = %v, %v; want an error about step", tt.in, got, err)
				}
			case err != nil || got != tt.want:
				t.Fatalf("parseStep(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestFloorTo(t *testing.T) {
	tests := []struct {
		in   string
		w    time.Duration
		want string
	}{
		{"2024-03-10T10:59:59.999999Z", time.Hour, "2024-03-10T10:00:00Z"},
		{"2024-03-10T11:00:00Z", time.Hour, "2024-03-10T11:00:00Z"},
		{"2024-03-10T23:59:59Z", day, "2024-03-10T00:00:00Z"},
		{"2024-03-10T10:01:30Z", time.Minute, "2024-03-10T10:01:00Z"},
		// Before the origin buckets are still floored, as in core/db.
		{"1999-12-31T12:00:00Z", day, "1999-12-31T00:00:00Z"},
		{"1969-07-20T20:17:40Z", time.Hour, "1969-07-20T20:00:00Z"},
	}
	for _, tt := range tests {
		if got := floorTo(mustTime(tt.in), tt.w); formatTime(got) != tt.want {
			t.Errorf("floorTo(%s, %s) = %s, want %s", tt.in, tt.w, formatTime(got), tt.want)
		}
	}
}

func TestDefaultRanges(t *testing.T) {
	end := mustTime("2024-03-11T01:23:45Z")
	tests := []struct {
		name string
		def  defaultStart
		want string
	}{
		{"raw", span(day), "2024-03-10T01:23:45Z"},
		{"1m", defaultBucketStart(time.Minute), "2024-03-10T01:24:00Z"},
		{"1h", defaultBucketStart(time.Hour), "2024-03-10T02:00:00Z"},
		{"1d", defaultBucketStart(day), "2024-02-11T00:00:00Z"},
	}
	for _, tt := range tests {
		if got := tt.def(end); formatTime(got) != tt.want {
			t.Errorf("%s: default start = %s, want %s", tt.name, formatTime(got), tt.want)
		}
	}
}

func TestNewParams(t *testing.T) {
	tests := []struct {
		query   string
		allowed []string
		msg     string // "" when accepted
	}{
		{"", nil, ""},
		{"a=1&b=2", []string{"a", "b"}, ""},
		{"x=1", nil, `"x" is not a parameter of this endpoint, which takes none`},
		{"a=1&z=1&y=1", []string{"a"}, `"y" is not a parameter of this endpoint; it takes a`},
		{"a=1&a=2", []string{"a"}, "a is given 2 times; give it once"},
		{"%22%0A=1", []string{"a"}, `"\"\n" is not a parameter`},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			_, err = newParams(q, tt.allowed...)
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("newParams = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("newParams = %v, want %q", err, tt.msg)
			}
		})
	}
}

func TestQuoteBoundsMessages(t *testing.T) {
	long := strings.Repeat("é", 100) // two bytes each: the cut must not split one
	got := quote(long)
	if !strings.HasSuffix(got, `"...`) || len(got) > 70 || strings.Contains(got, `\x`) {
		t.Errorf("quote(long) = %s", got)
	}
	if got := quote(strings.Repeat("\xc0", 100)); len(got) > 70 { // escapes are four bytes each
		t.Errorf("quote(invalid UTF-8) = %s", got)
	}
	if got := quote("a\"b\n"); got != `"a\"b\n"` {
		t.Errorf("quote = %s", got)
	}
}

func TestFormatSpan(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{90 * day, "90d"},
		{29*day + time.Hour, "29d1h"},
		{90*time.Minute + 5*time.Second, "1h30m5s"},
		{1500 * time.Millisecond, "1.5s"},
	}
	for _, tt := range tests {
		if got := formatSpan(tt.d); got != tt.want {
			t.Errorf("formatSpan(%v) = %s, want %s", tt.d, got, tt.want)
		}
	}
}

func TestNumberJSON(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{1.5, `1.5`},
		{-0.1, `-0.1`},
		{1e21, `1e+21`},
		{math.NaN(), `"NaN"`},
		{math.Inf(1), `"+Inf"`},
		{math.Inf(-1), `"-Inf"`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(number(tt.v))
		if err != nil || string(b) != tt.want {
			t.Errorf("marshal %v = %s, %v; want %s", tt.v, b, err, tt.want)
		}
	}
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2024-03-10T10:00:00Z", "1710064800000", "-1", "2024-03-10T10:00:00.5+05:30", "9999-12-31T23:59:59Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseTime("start", s)
		if err != nil {
			var pe *paramError
			if !errors.As(err, &pe) || len(pe.msg) > 300 {
				t.Fatalf("parseTime(%q): error %v is not a short parameter error", s, err)
			}
			return
		}
		if got.Location() != time.UTC || got.Before(minTime) || got.After(maxTime) || got.Nanosecond()%1000 != 0 {
			t.Fatalf("parseTime(%q) = %v: not UTC µs in years 1 to 9999", s, got)
		}
		// What responses write reads back the same.
		back, err := parseTime("start", formatTime(got))
		if err != nil || !back.Equal(got) {
			t.Fatalf("parseTime(formatTime(%v)) = %v, %v", got, back, err)
		}
	})
}

func FuzzParseStep(f *testing.F) {
	for _, s := range []string{"1m", "1h30m", "250ms", "2w", "1y1d", "5x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseStep("step", s)
		if err != nil {
			var pe *paramError
			if !errors.As(err, &pe) {
				t.Fatalf("parseStep(%q): error %v is not a parameter error", s, err)
			}
			return
		}
		if got < 0 || got%time.Millisecond != 0 {
			t.Fatalf("parseStep(%q) = %v", s, got)
		}
	})
}
