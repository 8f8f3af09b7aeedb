package logging

import (
	"context"
	"log/slog"
	"maps"
	"slices"
)

// lastWins keeps one attribute per top-level key in each record, the last
// one given: a record's own over its logger's, an inner With over an outer.
// Packages label the logger they are given (With("component", ...)) and
// are often given one labelled already: rt.Component's logger handed to
// the MQTT client, the agent's to its endpoint runner, a destination's
// to its worker. slog's handlers would write the key twice, and
// collectors disagree on which of two equal JSON keys counts. Attributes
// inside a group are left alone: g.component is another key.
type lastWins struct {
	root    slog.Handler    // the handler New built, without any With
	ops     []handlerOp     // WithAttrs and WithGroup calls since root
	keys    map[string]bool // top-level keys in ops; shared, never written after build
	cur     slog.Handler    // root with ops applied
	inGroup bool
}

// handlerOp is one WithGroup (group set) or WithAttrs call.
type handlerOp struct {
	group string
	attrs []slog.Attr
}

func newLastWins(h slog.Handler) *lastWins {
	return &lastWins{root: h, cur: h}
}

func (h *lastWins) Enabled(ctx context.Context, l slog.Level) bool {
	return h.cur.Enabled(ctx, l)
}

func (h *lastWins) Handle(ctx context.Context, r slog.Record) error {
	if h.inGroup || r.NumAttrs() == 0 {
		return h.cur.Handle(ctx, r)
	}
	// Records have a handful of attributes: a linear scan of the keys
	// seen, on the stack, costs less than a map.
	clash := false
	var buf [16]string
	seen := buf[:0]
	r.Attrs(func(a slog.Attr) bool {
		if h.keys[a.Key] || slices.Contains(seen, a.Key) {
			clash = true
			return false
		}
		seen = append(seen, a.Key)
		return true
	})
	if !clash {
		return h.cur.Handle(ctx, r)
	}
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, a)
		return true
	})
	attrs = dedupe(attrs)
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(attrs...)
	return h.without(keysOf(attrs)).Handle(ctx, out)
}

func (h *lastWins) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	h2 := *h
	if h.inGroup {
		h2.ops = append(h.ops[:len(h.ops):len(h.ops)], handlerOp{attrs: attrs})
		h2.cur = h.cur.WithAttrs(attrs)
		return &h2
	}
	attrs = dedupe(attrs)
	names := keysOf(attrs)
	clash := false
	for k := range names {
		clash = clash || h.keys[k]
	}
	if clash {
		h2 = *h.without(names)
	}
	h2.ops = append(h2.ops[:len(h2.ops):len(h2.ops)], handlerOp{attrs: attrs})
	h2.cur = h2.cur.WithAttrs(attrs)
	h2.keys = maps.Clone(h2.keys)
	if h2.keys == nil {
		h2.keys = names
	} else {
		maps.Copy(h2.keys, names)
	}
	return &h2
}

func (h *lastWins) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.ops = append(h.ops[:len(h.ops):len(h.ops)], handlerOp{group: name})
	h2.cur = h.cur.WithGroup(name)
	h2.inGroup = true
	return &h2
}

// without returns h rebuilt from root with the top-level attributes of
// the given keys left out. It is called only before any group is open, so
// every op is a WithAttrs at the top level.
func (h *lastWins) without(drop map[string]bool) *lastWins {
	h2 := &lastWins{root: h.root, cur: h.root, keys: map[string]bool{}}
	for _, op := range h.ops {
		kept := make([]slog.Attr, 0, len(op.attrs))
		for _, a := range op.attrs {
			if !drop[a.Key] {
				kept = append(kept, a)
				h2.keys[a.Key] = true
			}
		}
		if len(kept) > 0 {
			h2.ops = append(h2.ops, handlerOp{attrs: kept})
			h2.cur = h2.cur.WithAttrs(kept)
		}
	}
	return h2
}

// dedupe keeps the last attribute of each key, in the order of those.
func dedupe(attrs []slog.Attr) []slog.Attr {
	last := make(map[string]int, len(attrs))
	for i, a := range attrs {
		last[a.Key] = i
	}
	if len(last) == len(attrs) {
		return attrs
	}
	out := make([]slog.Attr, 0, len(last))
	for i, a := range attrs {
		if last[a.Key] == i {
			out = append(out, a)
		}
	}
	return out
}

func keysOf(attrs []slog.Attr) map[string]bool {
	keys := make(map[string]bool, len(attrs))
	for _, a := range attrs {
		keys[a.Key] = true
	}
	return keys
}
