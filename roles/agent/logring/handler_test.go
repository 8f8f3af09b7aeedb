package logring

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/slogtest"
	"time"
)

func newLogger(min slog.Leveler) (*slog.Logger, *Ring, *bytes.Buffer) {
	var buf bytes.Buffer
	ring := New(100)
	inner := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(Handler(inner, ring, min)), ring, &buf
}

func only(t *testing.T, r *Ring) Entry {
	t.Helper()
	got, total := r.Query(Filter{})
	if total != 1 {
		t.Fatalf("ring holds %d entries, want 1: %+v", total, got)
	}
	return got[0]
}

func TestHandlerEntry(t *testing.T) {
	tests := []struct {
		name string
		log  func(l *slog.Logger)
		want Entry // Timestamp not compared
	}{
		{
			name: "plain message",
			log:  func(l *slog.Logger) { l.Info("started") },
			want: Entry{Level: LevelInfo, Message: "started", Source: SourceSystem},
		},
		{
			name: "attributes and special keys",
			log: func(l *slog.Logger) {
				l.Warn("restart", "component", "supervisor", "appId", "1001", "source", "manager", "attempt", 3, "reason", "exit code 1")
			},
			want: Entry{Level: LevelWarn, Message: `restart attempt=3 reason="exit code 1"`, Component: "supervisor", AppID: "1001", Source: SourceManager},
		},
		{
			name: "pre-bound component",
			log:  func(l *slog.Logger) { l.With("component", "agent").Error("boom", "err", errors.New("disk full")) },
			want: Entry{Level: LevelError, Message: `boom err="disk full"`, Component: "agent", Source: SourceSystem},
		},
		{
			name: "record overrides pre-bound",
			log:  func(l *slog.Logger) { l.With("component", "agent", "k", 1).Info("m", "component", "mqtt") },
			want: Entry{Level: LevelInfo, Message: "m k=1", Component: "mqtt", Source: SourceSystem},
		},
		{
			name: "groups qualify keys and hide special keys",
			log: func(l *slog.Logger) {
				l.With("component", "api").WithGroup("req").With("id", 7).WithGroup("").Info("done", "component", "inner", slog.Group("hdr", "ua", "curl"))
			},
			want: Entry{Level: LevelInfo, Message: "done req.id=7 req.component=inner req.hdr.ua=curl", Component: "api", Source: SourceSystem},
		},
		{
			name: "empty attrs and inline groups",
			log: func(l *slog.Logger) {
				l.Info("m", slog.Attr{}, slog.Group("", "a", 1), slog.Group("empty"), "s", "", "q", `say "hi"`, "eq", "a=b")
			},
			want: Entry{Level: LevelInfo, Message: `m a=1 s="" q="say \"hi\"" eq="a=b"`, Source: SourceSystem},
		},
		{
			name: "custom levels map down",
			log:  func(l *slog.Logger) { l.Log(context.Background(), slog.LevelWarn+2, "between") },
			want: Entry{Level: LevelWarn, Message: "between", Source: SourceSystem},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, ring, buf := newLogger(slog.LevelDebug)
			before := time.Now().UnixMilli()
			tt.log(l)
			got := only(t, ring)
			if got.Timestamp < before || got.Timestamp > time.Now().UnixMilli() {
				t.Errorf("timestamp %d out of range", got.Timestamp)
			}
			got.Timestamp = 0
			if got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if buf.Len() == 0 {
				t.Error("inner handler got nothing")
			}
		})
	}
}

func TestHandlerLevels(t *testing.T) {
	var buf bytes.Buffer
	ring := New(100)
	// The console shows warn and up; the ring keeps info and up.
	inner := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})
	var lv slog.LevelVar
	lv.Set(slog.LevelInfo)
	l := slog.New(Handler(inner, ring, &lv))

	l.Debug("d")
	l.Info("i")
	l.Warn("w")
	if got, _ := ring.Query(Filter{}); len(got) != 2 || got[0].Message != "i" || got[1].Message != "w" {
		t.Errorf("ring %+v", got)
	}
	if out := buf.String(); strings.Contains(out, "msg=i") || !strings.Contains(out, "msg=w") {
		t.Errorf("inner got %q", out)
	}
	// Lowering the level at run time takes effect at once.
	lv.Set(slog.LevelDebug)
	l.Debug("d2")
	if _, total := ring.Query(Filter{}); total != 3 {
		t.Errorf("debug not recorded after lowering the level: %d", total)
	}
	if Handler(inner, ring, nil).Enabled(context.Background(), slog.LevelDebug) {
		t.Error("nil minLevel should default to info")
	}
}

type failing struct{ slog.Handler }

func (failing) Handle(context.Context, slog.Record) error { return errors.New("write failed") }

func TestHandlerInnerErrorStillRecords(t *testing.T) {
	ring := New(10)
	h := Handler(failing{slog.NewTextHandler(io.Discard, nil)}, ring, slog.LevelInfo)
	r := slog.NewRecord(time.UnixMilli(42), slog.LevelInfo, "m", 0)
	if err := h.Handle(context.Background(), r); err == nil {
		t.Error("inner error lost")
	}
	if got := only(t, ring); got.Timestamp != 42 {
		t.Errorf("timestamp %d, want the record's", got.Timestamp)
	}
}

// TestHandlerInnerConformance checks that records, attributes and groups
// reach the inner handler intact.
func TestHandlerInnerConformance(t *testing.T) {
	var buf bytes.Buffer
	ring := New(1000)
	inner := slog.NewJSONHandler(&buf, nil)
	slogtest.Run(t, func(t *testing.T) slog.Handler {
		buf.Reset()
		return Handler(inner, ring, slog.LevelInfo)
	}, func(t *testing.T) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		return m
	})
}

func TestHandlerConcurrent(t *testing.T) {
	ring := New(500)
	base := slog.New(Handler(slog.DiscardHandler, ring, slog.LevelInfo))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			l := base.With("component", fmt.Sprint("c", w))
			for i := range 300 {
				l.Info("tick", "i", i)
				if i%50 == 0 {
					ring.Query(Filter{Source: SourceSystem, Limit: 10})
				}
			}
		})
	}
	wg.Wait()
	got, total := ring.Query(Filter{Limit: MaxLimit})
	if total != 500 {
		t.Fatalf("total %d", total)
	}
	for _, e := range got {
		if !strings.HasPrefix(e.Component, "c") || !strings.HasPrefix(e.Message, "tick i=") {
			t.Fatalf("mixed-up entry %+v", e)
		}
	}
}
