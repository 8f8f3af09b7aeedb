package logring

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Attribute keys that fill Entry fields instead of the message. They are
// recognised only at the top level, not inside a group.
const (
	KeyComponent = "component"
	KeySource    = "source"
	KeyAppID     = "appId"
)

// Handler returns a slog.Handler that passes every record to inner and
// also copies records at or above minLevel (slog.LevelInfo if nil) into
// ring. The entry's Message is the record message followed by its
// attributes as key=value; the component, source and appId attributes
// fill their own fields instead, and Source defaults to system.
func Handler(inner slog.Handler, ring *Ring, minLevel slog.Leveler) slog.Handler {
	if minLevel == nil {
		minLevel = slog.LevelInfo
	}
	return &handler{inner: inner, ring: ring, min: minLevel}
}

// handler is immutable once built, so it is safe for concurrent use; With*
// return copies.
type handler struct {
	inner slog.Handler
	ring  *Ring
	min   slog.Leveler

	component, source, appID string
	bound                    string // pre-rendered attrs from WithAttrs
	prefix                   string // open groups, "a.b."
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	// The ring may want records the inner handler drops (a debug ring
	// behind an info console) and the other way round.
	return l >= h.min.Level() || h.inner.Enabled(ctx, l)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= h.min.Level() {
		h.ring.Add(h.entry(r))
	}
	if h.inner.Enabled(ctx, r.Level) {
		return h.inner.Handle(ctx, r)
	}
	return nil
}

func (h *handler) entry(r slog.Record) Entry {
	e := Entry{
		Level:     levelName(r.Level),
		Component: h.component,
		Source:    h.source,
		AppID:     h.appID,
	}
	ts := r.Time
	if ts.IsZero() {
		ts = time.Now()
	}
	e.Timestamp = ts.UnixMilli()

	var b strings.Builder
	b.WriteString(r.Message)
	b.WriteString(h.bound)
	r.Attrs(func(a slog.Attr) bool {
		if h.prefix == "" && takeField(&e.Component, &e.Source, &e.AppID, a) {
			return true
		}
		appendAttr(&b, h.prefix, a)
		return true
	})
	e.Message = b.String()
	if e.Source == "" {
		e.Source = SourceSystem
	}
	return e
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	h2 := *h
	h2.inner = h.inner.WithAttrs(attrs)
	var b strings.Builder
	b.WriteString(h.bound)
	for _, a := range attrs {
		if h.prefix == "" && takeField(&h2.component, &h2.source, &h2.appID, a) {
			continue
		}
		appendAttr(&b, h.prefix, a)
	}
	h2.bound = b.String()
	return &h2
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.inner = h.inner.WithGroup(name)
	h2.prefix = h.prefix + name + "."
	return &h2
}

// takeField moves a top-level component, source or appId attribute into
// its Entry field and reports whether it did.
func takeField(component, source, appID *string, a slog.Attr) bool {
	var dst *string
	switch a.Key {
	case KeyComponent:
		dst = component
	case KeySource:
		dst = source
	case KeyAppID:
		dst = appID
	default:
		return false
	}
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		return false
	}
	*dst = v.String()
	return true
}

// appendAttr renders a as " key=value", following slog's rules: empty
// attributes are dropped, groups flatten to "group.key", and a group with
// an empty key is inlined.
func appendAttr(b *strings.Builder, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, ga := range v.Group() {
			appendAttr(b, prefix, ga)
		}
		return
	}
	if a.Key == "" && v.Any() == nil {
		return
	}
	b.WriteByte(' ')
	b.WriteString(prefix)
	b.WriteString(a.Key)
	b.WriteByte('=')
	var s string
	switch v.Kind() {
	case slog.KindTime:
		s = v.Time().Format(time.RFC3339Nano)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			s = err.Error()
		} else {
			s = v.String()
		}
	default:
		s = v.String()
	}
	if needsQuote(s) {
		s = strconv.Quote(s)
	}
	b.WriteString(s)
}

// needsQuote keeps key=value pairs unambiguous: a value with spaces, an
// '=' or a quote would otherwise read as several pairs.
func needsQuote(s string) bool {
	if s == "" {
		return true
	}
	for _, r := range s {
		if unicode.IsSpace(r) || r == '=' || r == '"' || !unicode.IsPrint(r) {
			return true
		}
	}
	return false
}

// levelName maps slog levels, including custom ones in between, onto the
// four levels of the API.
func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return LevelDebug
	case l < slog.LevelWarn:
		return LevelInfo
	case l < slog.LevelError:
		return LevelWarn
	}
	return LevelError
}
