package logring

import (
	"errors"
	"testing"
)

func TestParseFilter(t *testing.T) {
	tests := []struct {
		name                        string
		level, source, since, limit string
		want                        Filter
		wantParam                   string
		wantMsg                     string
	}{
		{name: "nothing given", want: Filter{Limit: DefaultLimit}},
		{name: "all given", level: "warn", source: "container", since: "1700000000000", limit: "50",
			want: Filter{Level: LevelWarn, Source: SourceContainer, Since: 1700000000000, Limit: 50}},
		{name: "case and spaces", level: " ERROR ", source: "Manager", want: Filter{Level: LevelError, Source: SourceManager, Limit: DefaultLimit}},
		{name: "limit bounds", limit: "1000", want: Filter{Limit: 1000}},
		{name: "bad level", level: "fatal", wantParam: "level", wantMsg: "level must be one of debug, info, warn, error"},
		{name: "bad source", source: "kernel", wantParam: "source", wantMsg: "source must be one of system, container, manager"},
		{name: "since not a number", since: "yesterday", wantParam: "since", wantMsg: "since must be Unix milliseconds"},
		{name: "since negative", since: "-1", wantParam: "since", wantMsg: "since must be Unix milliseconds"},
		{name: "since ISO date", since: "2026-01-01T00:00:00Z", wantParam: "since", wantMsg: "since must be Unix milliseconds"},
		{name: "limit zero", limit: "0", wantParam: "limit", wantMsg: "limit must be 1..1000"},
		{name: "limit too high", limit: "1001", wantParam: "limit", wantMsg: "limit must be 1..1000"},
		{name: "limit not a number", limit: "ten", wantParam: "limit", wantMsg: "limit must be 1..1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFilter(tt.level, tt.source, tt.since, tt.limit)
			if tt.wantParam == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Errorf("got %+v, want %+v", got, tt.want)
				}
				return
			}
			var pe *ParamError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParamError", err)
			}
			if pe.Param != tt.wantParam || err.Error() != tt.wantMsg {
				t.Errorf("param %q message %q, want %q %q", pe.Param, err, tt.wantParam, tt.wantMsg)
			}
		})
	}
}

func TestValidateFilter(t *testing.T) {
	tests := []struct {
		f         Filter
		wantParam string
	}{
		{Filter{}, ""},
		{Filter{Level: LevelDebug, Source: SourceSystem, Since: 1, Limit: MaxLimit}, ""},
		{Filter{Level: "WARN"}, "level"},
		{Filter{Source: "x"}, "source"},
		{Filter{Since: -5}, "since"},
		{Filter{Limit: -1}, "limit"},
		{Filter{Limit: MaxLimit + 1}, "limit"},
	}
	for _, tt := range tests {
		err := ValidateFilter(tt.f)
		var pe *ParamError
		switch {
		case tt.wantParam == "" && err != nil:
			t.Errorf("%+v: unexpected %v", tt.f, err)
		case tt.wantParam != "" && (!errors.As(err, &pe) || pe.Param != tt.wantParam):
			t.Errorf("%+v: got %v, want a %s error", tt.f, err, tt.wantParam)
		}
	}
}
