package drift

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"time"
)

const windowMask = 1<<PresenceWindow - 1

// output is one protocol output's tracked fields. names is kept sorted so
// each batch is judged, and its events ordered, in path order.
type output struct {
	opts         Options
	fields       map[string]*field
	names        []string
	batches      uint64
	dropped      uint64
	overflow     bool   // a field was dropped since the limit was last reported or room was made
	firstDropped string // the first field dropped of that overflow
	limitDone    bool
	open         *batch
	spare        *batch
	// budgetStart is when the output's current EventBudget window began,
	// budgetUsed the events raised in it, overBudget those not raised.
	budgetStart time.Time
	budgetUsed  int
	overBudget  uint64 // the last closed batch, emptied, so a poll's batch costs no new map
}

// field is one tracked field. window holds presence in the last
// PresenceWindow batches, newest in bit 0.
type field struct {
	typ        Type
	expected   bool
	window     uint64
	warmupSeen int
	absent     int
	firstBatch uint64
	lastSeen   time.Time
	lastEvent  time.Time
	evented    bool
}

// batch is the fields of an open batch, at most one type per path.
// pendingNew counts the untracked paths in it, so the batch never holds
// more than maxFieldCount paths in all.
type batch struct {
	start, last time.Time
	seen        map[string]Type
	pendingNew  int
}

func newOutput(o Options) *output {
	return &output{opts: o, fields: map[string]*field{}}
}

// newBatch opens a batch at at, on the spare one when there is.
func (o *output) newBatch(at time.Time) *batch {
	b := o.spare
	if b == nil {
		return &batch{start: at, last: at, seen: map[string]Type{}}
	}
	o.spare = nil
	*b = batch{start: at, last: at, seen: b.seen}
	return b
}

// add puts a frame's fields into b and returns how many were dropped for
// the field limit. Within a batch a path keeps one type: a type other
// than the field's known one wins over the known one, so a change inside
// a window is not hidden by a later frame, and any type wins over null,
// which carries none.
func (o *output) add(b *batch, fields []Field, at time.Time) (dropped uint64) {
	if at.After(b.last) {
		b.last = at
	}
	for _, f := range fields {
		if prev, inBatch := b.seen[f.Path]; inBatch {
			if o.replaces(f.Path, prev, f.Type) {
				b.seen[f.Path] = f.Type
			}
			continue
		}
		if _, tracked := o.fields[f.Path]; !tracked {
			if len(o.fields)+b.pendingNew >= o.opts.MaxFieldCount {
				dropped++
				if !o.overflow {
					o.overflow, o.firstDropped = true, f.Path
				}
				continue
			}
			b.pendingNew++
		}
		b.seen[f.Path] = f.Type
	}
	o.dropped += dropped
	return dropped
}

// replaces says whether type t, seen again for path in the open batch,
// takes the place of prev, the type the batch holds.
func (o *output) replaces(path string, prev, t Type) bool {
	if t == prev || t == TypeNull {
		return false
	}
	if prev == TypeNull {
		return true
	}
	f := o.fields[path]
	return f != nil && prev == f.typ
}

// close judges the open batch against the rules of docs/drift.md and
// returns its events, without ID and protocol.
func (o *output) close() []Event {
	b := o.open
	o.open = nil
	o.batches++
	warm := o.batches > WarmupBatches
	at := b.last
	var events []Event
	emit := func(f *field, e Event) {
		e.At = at.UnixMilli()
		f.lastEvent, f.evented = at, true
		events = append(events, e)
	}
	for p, t := range b.seen {
		if _, ok := o.fields[p]; !ok {
			o.fields[p] = &field{typ: t, firstBatch: o.batches}
			o.insertName(p)
		}
	}
	retired := 0
	for _, name := range o.names {
		f := o.fields[name]
		t, present := b.seen[name]
		f.window = f.window << 1 & windowMask
		if present {
			f.window |= 1
			f.absent = 0
			f.lastSeen = at
			if o.batches <= WarmupBatches {
				f.warmupSeen++
			}
			switch {
			case f.firstBatch == o.batches && warm:
				emit(f, Event{Kind: KindNewField, Field: name, SeenType: t,
					Detail: DetailAppeared + ": first seen after warm-up"})
			case t != f.typ && t != TypeNull && f.typ != TypeNull && warm && !f.suppressed(at):
				emit(f, Event{Kind: KindTypeChanged, Field: name, ExpectedType: f.typ, SeenType: t,
					Detail: fmt.Sprintf("was %s, now %s", f.typ, t)})
			}
			if t != TypeNull {
				f.typ = t
			}
		} else {
			f.absent++
			switch {
			case f.absent >= RetireAfter:
				if f.expected {
					emit(f, Event{Kind: KindFieldRetired, Field: name, ExpectedType: f.typ, BatchesAbsent: f.absent,
						Detail: fmt.Sprintf("absent for %d batches, no longer expected or tracked", f.absent)})
				}
				delete(o.fields, name)
				retired++
				continue
			case f.expected && warm && f.absent >= MissingAfter && !f.suppressed(at):
				emit(f, Event{Kind: KindMissingField, Field: name, ExpectedType: f.typ, BatchesAbsent: f.absent,
					Detail: fmt.Sprintf("expected field absent for %d batches", f.absent)})
			}
		}
		if n := bits.OnesCount64(f.window); warm && !f.expected && n >= PromoteAt {
			f.expected = true
			emit(f, Event{Kind: KindNewField, Field: name, SeenType: f.typ,
				Detail: fmt.Sprintf("%s: present in %d of the last %d batches, now expected", DetailPromoted, n, PresenceWindow)})
		}
		if o.batches == WarmupBatches {
			f.expected = f.warmupSeen >= WarmupExpected
		}
	}
	if retired > 0 {
		o.names = slices.DeleteFunc(o.names, func(n string) bool { return o.fields[n] == nil })
		// Room was made: the next overflow is news again.
		o.overflow, o.limitDone = false, false
	}
	if warm && o.overflow && !o.limitDone {
		o.limitDone = true
		// First, so that the event budget never cuts it: it explains the
		// fields that go unreported.
		events = slices.Insert(events, 0, Event{Kind: KindFieldLimit, Field: o.firstDropped, At: at.UnixMilli(),
			Detail: fmt.Sprintf("tracking %d fields, the maxFieldCount; new fields are counted in fields_dropped and not tracked", len(o.fields))})
	}
	clear(b.seen)
	o.spare = b
	return events
}

// suppressed: an alert for f within SuppressionDelay of its last event
// is not raised. A clock stepping back keeps it suppressed until it
// passes the last event again.
func (f *field) suppressed(at time.Time) bool {
	return f.evented && at.Sub(f.lastEvent) < SuppressionDelay
}

func (o *output) insertName(p string) {
	i := sort.SearchStrings(o.names, p)
	o.names = append(o.names, "")
	copy(o.names[i+1:], o.names[i:])
	o.names[i] = p
}

func (o *output) state(protocol string) OutputState {
	s := OutputState{Protocol: protocol, Options: o.opts, Batches: o.batches,
		WarmedUp: o.batches >= WarmupBatches, FieldsDropped: o.dropped, EventsOverBudget: o.overBudget,
		Fields: make([]FieldState, 0, len(o.names))}
	span := min(o.batches, PresenceWindow)
	for _, name := range o.names {
		f := o.fields[name]
		fs := FieldState{Field: name, Type: f.typ, Expected: f.expected, BatchesAbsent: f.absent,
			LastSeen: f.lastSeen.UnixMilli()}
		if span > 0 {
			fs.Presence = float64(bits.OnesCount64(f.window)) / float64(span)
		}
		s.Fields = append(s.Fields, fs)
	}
	return s
}
