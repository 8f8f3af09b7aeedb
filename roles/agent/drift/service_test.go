package drift

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

type fakeDeps struct {
	opts map[string]Options
	err  error

	mu     sync.Mutex
	stored []Event
	sent   []control.Event
}

func (f *fakeDeps) DriftOptions(context.Context) (map[string]Options, error) { return f.opts, f.err }

func (f *fakeDeps) SaveDriftEvents(_ context.Context, events []Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stored = append(f.stored, events...)
	return nil
}

func (f *fakeDeps) SendEvent(_ context.Context, e control.Event) (int, error) {
	if err := e.Validate(); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, e)
	return 1, nil
}

// TestServiceStoresAndPublishes: readings observed with the service's
// clock raise one missing_field, stored and published as a drift event
// of warning severity; a frame of a protocol not enabled is ignored.
func TestServiceStoresAndPublishes(t *testing.T) {
	deps := &fakeDeps{opts: map[string]Options{"modbus": {Enabled: true, MaxFieldCount: 10}}}
	s := NewService(ServiceOptions{Options: deps, Store: deps, Cloud: deps})
	now := t0
	s.SetClock(func() time.Time { return now })
	ctx := context.Background()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	reading := func(metric string, v any) adapters.Reading { return adapters.Reading{Metric: metric, Value: v} }
	for i := range WarmupBatches + MissingAfter {
		now = now.Add(time.Second)
		rs := []adapters.Reading{reading("temp", 21.5), reading("state", "RUN")}
		if i >= WarmupBatches {
			rs = rs[:1]
		}
		s.Readings("modbus", rs)
		s.Frame("mqtt", []byte(`{"a":1}`))
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if len(deps.stored) != 1 || deps.stored[0].Kind != KindMissingField || deps.stored[0].Field != "state" {
		t.Fatalf("stored %+v, want one missing_field of state", deps.stored)
	}
	if len(deps.sent) != 1 {
		t.Fatalf("sent %+v", deps.sent)
	}
	e := deps.sent[0]
	var data Event
	if err := json.Unmarshal(e.Data, &data); err != nil || data != deps.stored[0] {
		t.Fatalf("sent data %s (%v), want the stored event %+v", e.Data, err, deps.stored[0])
	}
	if e.Kind != control.EventDrift || e.Severity != control.SeverityWarning || e.ID != data.ID || e.Timestamp != now.UnixMilli() {
		t.Fatalf("sent %+v", e)
	}
	if st := s.State(); len(st.Outputs) != 0 {
		t.Fatalf("state after Stop: %+v", st)
	}
	s.Readings("modbus", []adapters.Reading{reading("x", 1)}) // after Stop: ignored
}

func TestServiceStartFails(t *testing.T) {
	deps := &fakeDeps{err: errors.New("store closed")}
	if err := NewService(ServiceOptions{Options: deps, Store: deps}).Start(context.Background()); err == nil {
		t.Fatal("Start without options succeeded")
	}
}

func TestTypeOf(t *testing.T) {
	type point struct{ X int }
	cases := []struct {
		v    any
		want Type
	}{
		{nil, TypeNull}, {"s", TypeString}, {true, TypeBool}, {1.5, TypeNumber}, {int16(-3), TypeNumber},
		{uint64(7), TypeNumber}, {json.Number("4"), TypeNumber}, {[]any{1}, TypeArray},
		{map[string]any{}, TypeObject}, {point{1}, TypeObject}, {[]int{1}, TypeArray}, {time.Time{}, TypeString},
	}
	for _, tc := range cases {
		if got := TypeOf(tc.v); got != tc.want {
			t.Errorf("TypeOf(%#v) = %s, want %s", tc.v, got, tc.want)
		}
	}
}
