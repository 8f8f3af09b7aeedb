package logging

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestParseLevel(t *testing.T) {
	tests := []struct {
		in      string
		want    slog.Level
		wantErr bool
	}{
		{"debug", slog.LevelDebug, false},
		{"INFO", slog.LevelInfo, false},
		{"", slog.LevelInfo, false},
		{"warning", slog.LevelWarn, false},
		{" error ", slog.LevelError, false},
		{"verbose", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseLevel(tt.in)
		if (err != nil) != tt.wantErr || (!tt.wantErr && got != tt.want) {
			t.Errorf("ParseLevel(%q) = %v, %v", tt.in, got, err)
		}
	}
}

func TestNewFormats(t *testing.T) {
	tests := []struct {
		format string
		want   string
	}{
		{FormatJSON, `"msg":"hello"`},
		{FormatText, `msg=hello`},
		// A buffer is not a terminal, so auto picks JSON.
		{FormatAuto, `"msg":"hello"`},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		log, err := New(&buf, slog.LevelInfo, tt.format)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hello")
		log.Debug("hidden")
		if !strings.Contains(buf.String(), tt.want) || strings.Contains(buf.String(), "hidden") {
			t.Errorf("format %s wrote %q", tt.format, buf.String())
		}
	}
	if _, err := New(&bytes.Buffer{}, slog.LevelInfo, "xml"); err == nil {
		t.Error("unknown format accepted")
	}
}

func TestAtLeast(t *testing.T) {
	var buf bytes.Buffer
	base, _ := New(&buf, slog.LevelInfo, FormatText)
	quiet := AtLeast(base.With("component", "lib"), slog.LevelWarn)
	quiet.Info("routine")
	quiet.Warn("trouble")
	if s := buf.String(); strings.Contains(s, "routine") || !strings.Contains(s, "trouble") || !strings.Contains(s, "component=lib") {
		t.Errorf("got %q", s)
	}
	buf.Reset()
	debug, _ := New(&buf, slog.LevelDebug, FormatText)
	AtLeast(debug, slog.LevelWarn).Info("routine")
	if !strings.Contains(buf.String(), "routine") {
		t.Error("a debug run should see a library's info lines")
	}
}

func TestDurationsReadable(t *testing.T) {
	var buf bytes.Buffer
	log, _ := New(&buf, slog.LevelInfo, FormatJSON)
	log.Info("stopped", "ran", 1500*time.Millisecond)
	if !strings.Contains(buf.String(), `"ran":"1.5s"`) {
		t.Errorf("got %s", buf.String())
	}
}
