package logging

import (
	"context"
	"log/slog"
)

// ComponentKey is the attribute that names the part of the process a
// record comes from.
const ComponentKey = "component"

// oneComponent keeps one component attribute per record, the innermost.
// Packages label the logger they are given with With("component", ...),
// and are often given one that is labelled already (rt.Component's logger
// handed to the MQTT client, the agent's to its endpoint runner); slog's
// handlers would write the key twice, and collectors disagree on which of
// two equal JSON keys counts. Only top-level attributes are concerned: a
// component inside a group is a different key.
type oneComponent struct {
	root      slog.Handler // the handler New built, without any With
	ops       []handlerOp  // WithAttrs and WithGroup since root, without component
	component *slog.Attr   // the innermost component given to WithAttrs
	cur       slog.Handler // root with component and ops applied
	inGroup   bool
}

// handlerOp is one WithGroup (group set) or WithAttrs call.
type handlerOp struct {
	group string
	attrs []slog.Attr
}

func newOneComponent(h slog.Handler) *oneComponent {
	return &oneComponent{root: h, cur: h}
}

func (h *oneComponent) Enabled(ctx context.Context, l slog.Level) bool {
	return h.cur.Enabled(ctx, l)
}

func (h *oneComponent) Handle(ctx context.Context, r slog.Record) error {
	if h.inGroup {
		return h.cur.Handle(ctx, r)
	}
	n := 0
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == ComponentKey {
			n++
		}
		return true
	})
	if n == 0 || (n == 1 && h.component == nil) {
		return h.cur.Handle(ctx, r)
	}
	// The record names its own component: it wins over the logger's, and
	// the last of several in the record wins over the others.
	var last slog.Attr
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == ComponentKey {
			last = a
		} else {
			out.AddAttrs(a)
		}
		return true
	})
	out.AddAttrs(last)
	return h.build(nil).Handle(ctx, out)
}

func (h *oneComponent) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	h2 := *h
	if h.inGroup {
		h2.ops = append(h.ops[:len(h.ops):len(h.ops)], handlerOp{attrs: attrs})
		h2.cur = h.cur.WithAttrs(attrs)
		return &h2
	}
	var comp *slog.Attr
	rest := make([]slog.Attr, 0, len(attrs))
	for _, a := range attrs {
		if a.Key == ComponentKey {
			comp = &a
		} else {
			rest = append(rest, a)
		}
	}
	if len(rest) > 0 {
		h2.ops = append(h.ops[:len(h.ops):len(h.ops)], handlerOp{attrs: rest})
	}
	if comp == nil {
		h2.cur = h.cur.WithAttrs(rest)
		return &h2
	}
	h2.component = comp
	h2.cur = h2.build(comp)
	return &h2
}

func (h *oneComponent) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.ops = append(h.ops[:len(h.ops):len(h.ops)], handlerOp{group: name})
	h2.cur = h.cur.WithGroup(name)
	h2.inGroup = true
	return &h2
}

// build applies component (when not nil) and then ops to root. The
// component goes first, so it stays near the message in every format.
func (h *oneComponent) build(component *slog.Attr) slog.Handler {
	out := h.root
	if component != nil {
		out = out.WithAttrs([]slog.Attr{*component})
	}
	for _, op := range h.ops {
		if op.group != "" {
			out = out.WithGroup(op.group)
		} else {
			out = out.WithAttrs(op.attrs)
		}
	}
	return out
}
