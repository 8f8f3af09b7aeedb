// Package drift detects schema drift in the payloads of one agent's
// protocol outputs: fields that stop arriving, fields that appear, fields
// whose JSON type changes. The rules, their numbers and their limits are
// in docs/drift.md.
//
// The detector is pure computation: no I/O, no goroutines, no clock. The
// caller feeds frames or polled batches with their times, calls Flush
// from its own ticker, and stores and publishes the events it gets back,
// so tests drive it with a fake clock. One mutex makes it safe for
// concurrent use; every call is bounded by the output's maxFieldCount.
package drift

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"
)

// The rules (docs/drift.md, section Rules).
const (
	WarmupBatches    = 20 // no event before this many batches
	WarmupExpected   = 10 // present in 50 % of the warm-up batches: expected
	MissingAfter     = 10 // consecutive absent batches before missing_field
	PresenceWindow   = 50 // batches the presence ratio looks back over
	PromoteAt        = 30 // 60 % of PresenceWindow: promoted to expected
	RetireAfter      = 250
	SuppressionDelay = 30 * time.Minute
	// EventBudget caps an output's events per SuppressionDelay: a payload
	// whose keys change all the time (a timestamp as a key) or a wholesale
	// rename must not flood the store and the cloud's critical queue.
	EventBudget = 100
)

// Detector tracks the fields of every enabled protocol output.
type Detector struct {
	mu      sync.Mutex
	outputs map[string]*output
	run     string // random, so event ids differ from those of earlier detectors
	seq     uint64
	stats   Stats
}

// Stats are the detector's totals since it was made.
type Stats struct {
	Outputs       int             `json:"outputs"`
	Fields        int             `json:"fields"`
	Batches       uint64          `json:"batches"`
	FieldsDropped uint64          `json:"fields_dropped"`
	Events        map[Kind]uint64 `json:"events"`
	// EventsOverBudget counts the events not raised for EventBudget.
	EventsOverBudget uint64 `json:"events_over_budget"`
}

// New returns a detector with no output enabled.
func New() *Detector {
	var run [6]byte
	_, _ = rand.Read(run[:]) // never fails (crypto/rand)
	return &Detector{outputs: map[string]*output{}, run: hex.EncodeToString(run[:]), stats: Stats{Events: map[Kind]uint64{}}}
}

// SetOptions applies an output's options. Disabling drops the output's
// state. Lowering maxFieldCount below the number of fields tracked starts
// the output over, warm-up included, since no field can be dropped
// without losing its history; any other change keeps the state, and an
// open batch goes on under the new window.
func (d *Detector) SetOptions(protocol string, o Options) error {
	if protocol == "" {
		return errors.New("drift: set options: empty protocol")
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("drift: set options of %s: %w", protocol, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.outputs[protocol]
	switch {
	case !o.Enabled:
		delete(d.outputs, protocol)
	case out == nil || o.MaxFieldCount < len(out.fields):
		d.outputs[protocol] = newOutput(o)
	default:
		out.opts = o
	}
	return nil
}

// Observe adds one frame's fields to the output's open batch, closing
// the batch first when the frame arrives at or after its window's end,
// and returns the events of any batch it closed. With windowMs 0 the
// frame is a batch of its own. An output not enabled ignores the frame.
func (d *Detector) Observe(protocol string, fields []Field, at time.Time) ([]Event, error) {
	return d.observe(protocol, fields, at, false)
}

// ObserveJSON flattens a JSON frame and observes its fields. The frame
// of an output not enabled is not even parsed.
func (d *Detector) ObserveJSON(protocol string, frame []byte, at time.Time) ([]Event, error) {
	if !d.Enabled(protocol) {
		return nil, nil
	}
	buf := fieldBufs.Get().(*[]Field)
	defer fieldBufs.Put(buf)
	fields, err := flattenInto(*buf, frame)
	if err != nil {
		return nil, fmt.Errorf("observe %s: %w", protocol, err)
	}
	*buf = fields
	return d.Observe(protocol, fields, at)
}

// fieldBufs recycle the fields of a frame: the detector keeps none of
// them.
var fieldBufs = sync.Pool{New: func() any { return new([]Field) }}

// Enabled says whether the protocol's output is tracked, so a caller can
// skip building the fields of one that is not.
func (d *Detector) Enabled(protocol string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.outputs[protocol] != nil
}

// ObserveBatch observes a complete batch, such as one poll's data points
// named by the caller, whatever the window: an open batch of frames is
// closed first. It returns the events of both.
func (d *Detector) ObserveBatch(protocol string, fields []Field, at time.Time) ([]Event, error) {
	return d.observe(protocol, fields, at, true)
}

// observe is Observe, or with whole ObserveBatch.
func (d *Detector) observe(protocol string, fields []Field, at time.Time, whole bool) ([]Event, error) {
	if err := checkFields(fields); err != nil {
		return nil, fmt.Errorf("drift: observe %s: %w", protocol, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.outputs[protocol]
	if out == nil {
		return nil, nil
	}
	var events []Event
	window := time.Duration(out.opts.WindowMs) * time.Millisecond
	if out.open != nil && (whole || !at.Before(out.open.start.Add(window))) {
		events = d.close(protocol, out)
	}
	if out.open == nil {
		out.open = out.newBatch(at)
	}
	d.stats.FieldsDropped += out.add(out.open, fields, at)
	if whole || window == 0 {
		events = append(events, d.close(protocol, out)...)
	}
	return events, nil
}

// Flush closes every open batch whose window has ended at now, so a
// batch does not wait for the next frame to be judged; the caller calls
// it from a ticker. Events come in protocol order.
func (d *Detector) Flush(now time.Time) []Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	protocols := make([]string, 0, len(d.outputs))
	for p := range d.outputs {
		protocols = append(protocols, p)
	}
	sort.Strings(protocols)
	var events []Event
	for _, p := range protocols {
		out := d.outputs[p]
		window := time.Duration(out.opts.WindowMs) * time.Millisecond
		if out.open != nil && !now.Before(out.open.start.Add(window)) {
			events = append(events, d.close(p, out)...)
		}
	}
	return events
}

// close judges the output's open batch, keeps its events within the
// output's EventBudget and numbers them.
func (d *Detector) close(protocol string, out *output) []Event {
	at := out.open.last
	events := out.close()
	d.stats.Batches++
	if out.budgetStart.IsZero() || at.Sub(out.budgetStart) >= SuppressionDelay || at.Before(out.budgetStart) {
		out.budgetStart, out.budgetUsed = at, 0
	}
	if room := EventBudget - out.budgetUsed; len(events) > room {
		over := uint64(len(events) - room)
		out.overBudget += over
		d.stats.EventsOverBudget += over
		events = events[:room]
	}
	out.budgetUsed += len(events)
	for i := range events {
		d.seq++
		events[i].ID = d.run + "-" + strconv.FormatUint(d.seq, 10)
		events[i].Protocol = protocol
		d.stats.Events[events[i].Kind]++
	}
	return events
}

// OutputState is what the detector knows of one output.
type OutputState struct {
	Protocol      string  `json:"protocol"`
	Options       Options `json:"options"`
	Batches       uint64  `json:"batches"`
	WarmedUp      bool    `json:"warmed_up"`
	FieldsDropped uint64  `json:"fields_dropped"`
	// EventsOverBudget counts the output's events not raised for
	// EventBudget.
	EventsOverBudget uint64       `json:"events_over_budget"`
	Fields           []FieldState `json:"fields"`
}

// FieldState is one tracked field. Presence is the share of the last
// PresenceWindow batches (fewer while the output has had fewer) that
// carried it.
type FieldState struct {
	Field         string  `json:"field"`
	Type          Type    `json:"type"`
	Expected      bool    `json:"expected"`
	Presence      float64 `json:"presence"`
	LastSeen      int64   `json:"last_seen"` // Unix milliseconds
	BatchesAbsent int     `json:"batches_absent"`
}

// State returns an output's tracked fields in path order, and false when
// the output is not enabled.
func (d *Detector) State(protocol string) (OutputState, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.outputs[protocol]
	if out == nil {
		return OutputState{}, false
	}
	return out.state(protocol), true
}

// States returns the state of every enabled output, in protocol order.
func (d *Detector) States() []OutputState {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]OutputState, 0, len(d.outputs))
	for p, o := range d.outputs {
		out = append(out, o.state(p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Protocol < out[j].Protocol })
	return out
}

// Stats returns the totals, with Outputs and Fields as they are now.
func (d *Detector) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.Events = make(map[Kind]uint64, len(d.stats.Events))
	for k, n := range d.stats.Events {
		s.Events[k] = n
	}
	s.Outputs = len(d.outputs)
	for _, out := range d.outputs {
		s.Fields += len(out.fields)
	}
	return s
}

func checkFields(fields []Field) error {
	for _, f := range fields {
		if !f.Type.valid() {
			return fmt.Errorf("field %q: unknown type %q", f.Path, f.Type)
		}
	}
	return nil
}
