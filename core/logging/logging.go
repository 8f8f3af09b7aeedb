// Package logging builds the process's slog.Logger from configuration: text
// for people at a terminal, JSON for log collectors everywhere else.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
)

// Format values accepted by New.
const (
	FormatAuto = "auto"
	FormatText = "text"
	FormatJSON = "json"
)

// ParseLevel turns a level name into a slog.Level. "warning" is accepted
// because operators type it.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q (want debug, info, warn or error)", s)
}

// New returns a logger writing to w. With FormatAuto it picks text when w is a
// terminal and JSON otherwise. A *slog.LevelVar as level lets the level
// change while the process runs (the Cloud API's system config does).
func New(w io.Writer, level slog.Leveler, format string) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationsAsText}
	var h slog.Handler
	switch format {
	case FormatAuto, "":
		if isTerminal(w) {
			h = slog.NewTextHandler(w, opts)
		} else {
			h = slog.NewJSONHandler(w, opts)
		}
	case FormatText:
		h = slog.NewTextHandler(w, opts)
	case FormatJSON:
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("unknown log format %q (want auto, text or json)", format)
	}
	return slog.New(newLastWins(h)), nil
}

// durationsAsText renders durations as "1.5s" rather than slog's JSON
// default of integer nanoseconds, which nobody reads correctly at a glance.
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// AtLeast returns a logger that drops records below min unless the base
// logger is at debug, for chatty third-party libraries that log routine
// events at Info.
func AtLeast(base *slog.Logger, min slog.Level) *slog.Logger {
	if base.Enabled(context.Background(), slog.LevelDebug) {
		return base
	}
	return slog.New(minLevel{Handler: base.Handler(), min: min})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
