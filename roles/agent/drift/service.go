package drift

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// FlushEvery is how often the service closes the batches whose window
// has ended: a batch is judged at most this long after its window.
const FlushEvery = 250 * time.Millisecond

// MaxPending bounds the events found and not yet stored; past it new
// ones are dropped and counted (Stats.EventsDropped), so a store that
// cannot keep up costs bounded memory.
const MaxPending = 10000

// OptionSource reads every protocol output's stored drift options.
type OptionSource interface {
	DriftOptions(ctx context.Context) (map[string]Options, error)
}

// EventStore keeps events for GET /v1/drift/events.
type EventStore interface {
	SaveDriftEvents(ctx context.Context, events []Event) error
}

// EventSender publishes an event to the cloud (publish.Router.SendEvent).
type EventSender interface {
	SendEvent(ctx context.Context, e control.Event) (int, error)
}

// ServiceOptions are what NewService needs.
type ServiceOptions struct {
	Options OptionSource
	Store   EventStore
	Cloud   EventSender
	Log     *slog.Logger
}

// Service is the agent's drift detection, one lifecycle service of the
// agent's group: Start makes a Detector and applies the stored options,
// frames and readings are observed as the endpoints deliver them, Run
// flushes ended windows every FlushEvery and hands the events to the
// store and the cloud. A soft reboot starts over with a new Detector,
// warm-up included: what a run learnt does not outlive it.
type Service struct {
	opts ServiceOptions
	log  *slog.Logger
	now  atomic.Pointer[func() time.Time]
	det  atomic.Pointer[Detector]
	kick chan struct{}

	mu            sync.Mutex
	pending       []Event
	eventsDropped uint64
	badFrames     uint64
}

// NewService builds the service without I/O.
func NewService(o ServiceOptions) *Service {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{opts: o, log: log, kick: make(chan struct{}, 1)}
	s.SetClock(time.Now)
	return s
}

// SetClock replaces the clock frames and readings are observed with and
// windows are flushed by; tests drive the rules' time with it.
func (s *Service) SetClock(now func() time.Time) { s.now.Store(&now) }

func (s *Service) clock() time.Time { return (*s.now.Load())() }

// Name implements lifecycle.Service.
func (s *Service) Name() string { return "drift" }

// Start makes the run's detector and applies every stored option. An
// option the detector refuses (stored by an older build) leaves its
// output off, with a warning.
func (s *Service) Start(ctx context.Context) error {
	stored, err := s.opts.Options.DriftOptions(ctx)
	if err != nil {
		return fmt.Errorf("drift: load options: %w", err)
	}
	d := New()
	for protocol, o := range stored {
		if err := d.SetOptions(protocol, o); err != nil {
			s.log.Warn("drift options ignored", "protocol", protocol, "err", err)
		}
	}
	s.det.Store(d)
	return nil
}

// Run flushes ended windows and stores and publishes events until ctx
// ends.
func (s *Service) Run(ctx context.Context) error {
	t := time.NewTicker(FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if d := s.det.Load(); d != nil {
				s.enqueue(d.Flush(s.clock()))
			}
		case <-s.kick:
		}
		s.drain(ctx)
	}
}

// Stop ends observation and hands on the events still pending; the
// store and the publisher stop after this service. Open batches are
// dropped unjudged: a window cut short would count as absence.
func (s *Service) Stop(ctx context.Context) error {
	s.det.Store(nil)
	s.drain(ctx)
	return nil
}

// SetOptions applies a protocol output's new options at once.
func (s *Service) SetOptions(protocol string, o Options) error {
	d := s.det.Load()
	if d == nil {
		return nil // the next Start reads them from the store
	}
	return d.SetOptions(protocol, o)
}

// Frame observes one raw JSON frame of an endpoint of protocol. A frame
// that does not flatten is counted, not observed: the endpoint reports it
// as a BAD reading already.
func (s *Service) Frame(protocol string, frame []byte) {
	d := s.det.Load()
	if d == nil {
		return
	}
	events, err := d.ObserveJSON(protocol, frame, s.clock())
	if err != nil {
		s.mu.Lock()
		s.badFrames++
		s.mu.Unlock()
		return
	}
	s.enqueue(events)
}

// Readings observes one poll's or one pushed message's readings: each
// is the field named by its metric, typed by its value. It allocates
// nothing once warm and the output's fields are known.
func (s *Service) Readings(protocol string, rs []adapters.Reading) {
	d := s.det.Load()
	if d == nil || !d.Enabled(protocol) {
		return
	}
	buf := fieldBufs.Get().(*[]Field)
	fields := (*buf)[:0]
	for i := range rs {
		fields = append(fields, Field{Path: rs[i].Metric, Type: TypeOf(rs[i].Value)})
	}
	events, err := d.Observe(protocol, fields, s.clock())
	*buf = fields
	fieldBufs.Put(buf)
	if err != nil {
		panic("BUG: " + err.Error()) // TypeOf gives known types only
	}
	s.enqueue(events)
}

// TypeOf is the JSON type v encodes as.
func TypeOf(v any) Type {
	switch v.(type) {
	case nil:
		return TypeNull
	case string:
		return TypeString
	case bool:
		return TypeBool
	case float64, float32, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, json.Number:
		return TypeNumber
	case []any:
		return TypeArray
	case map[string]any:
		return TypeObject
	}
	// Other values encode by their own rules; the detector only compares
	// types, so an encoding is enough to name one.
	b, err := json.Marshal(v)
	if err != nil || len(b) == 0 {
		return TypeNull
	}
	switch b[0] {
	case '"':
		return TypeString
	case '{':
		return TypeObject
	case '[':
		return TypeArray
	case 't', 'f':
		return TypeBool
	case 'n':
		return TypeNull
	}
	return TypeNumber
}

// ServiceState is GET /v1/drift/state: every enabled output's state and
// the totals.
type ServiceState struct {
	Outputs []OutputState `json:"outputs"`
	Stats   ServiceStats  `json:"stats"`
}

// ServiceStats are the detector's totals with the service's own.
type ServiceStats struct {
	Stats
	BadFrames     uint64 `json:"bad_frames"`
	EventsDropped uint64 `json:"events_dropped"`
}

// State returns what the run's detector knows; empty before Start.
func (s *Service) State() ServiceState {
	st := ServiceState{Outputs: []OutputState{}}
	if d := s.det.Load(); d != nil {
		st.Outputs = d.States()
		st.Stats.Stats = d.Stats()
	}
	s.mu.Lock()
	st.Stats.BadFrames, st.Stats.EventsDropped = s.badFrames, s.eventsDropped
	s.mu.Unlock()
	return st
}

func (s *Service) enqueue(events []Event) {
	if len(events) == 0 {
		return
	}
	s.mu.Lock()
	room := MaxPending - len(s.pending)
	if room < len(events) {
		s.eventsDropped += uint64(len(events) - max(room, 0))
		events = events[:max(room, 0)]
	}
	s.pending = append(s.pending, events...)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// drain stores the pending events, then offers each to the cloud. A
// failure is logged: events are findings, and the detector goes on.
func (s *Service) drain(ctx context.Context) {
	s.mu.Lock()
	events := s.pending
	s.pending = nil
	s.mu.Unlock()
	if len(events) == 0 {
		return
	}
	if err := s.opts.Store.SaveDriftEvents(ctx, events); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("drift events not stored", "events", len(events), "err", err)
	}
	for _, e := range events {
		s.log.Info("schema drift", "protocol", e.Protocol, "kind", e.Kind, "field", e.Field)
		if s.opts.Cloud == nil {
			continue
		}
		data, err := json.Marshal(e)
		if err != nil {
			panic("BUG: drift: encode event: " + err.Error())
		}
		ce := control.Event{ID: e.ID, Kind: control.EventDrift, Severity: e.Kind.Severity(), Timestamp: e.At, Data: data}
		if _, err := s.opts.Cloud.SendEvent(ctx, ce); err != nil {
			s.log.Warn("drift event not published", "id", e.ID, "err", err)
		}
	}
}

var _ lifecycle.Service = (*Service)(nil)
