package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// memEndpoints is Endpoints over a map, counting what the reconciler
// asks of it.
type memEndpoints struct {
	stored  map[string]adapters.Endpoint // by name
	halted  bool
	puts    int
	removes int
	// runs counts SetStopped calls by their argument.
	runs map[bool]int
}

func (m *memEndpoints) Stored(context.Context) ([]adapters.Endpoint, error) {
	out := make([]adapters.Endpoint, 0, len(m.stored))
	for _, name := range sortedNames(m.stored) {
		out = append(out, m.stored[name])
	}
	return out, nil
}

func (m *memEndpoints) Build(te control.TargetEndpoint) (adapters.Endpoint, error) {
	ep := adapters.Endpoint{UUID: "new-" + te.Name, Name: te.Name, Protocol: te.Protocol, Connection: te.Connection,
		PollIntervalMS: 1000, Enabled: true, DataPoints: []adapters.DataPoint{}}
	if te.Enabled != nil {
		ep.Enabled = *te.Enabled
	}
	return ep, nil
}

func (m *memEndpoints) Put(_ context.Context, ep adapters.Endpoint, _ bool) error {
	m.stored[ep.Name] = ep
	m.puts++
	return nil
}

func (m *memEndpoints) Remove(_ context.Context, ep adapters.Endpoint) error {
	delete(m.stored, ep.Name)
	m.removes++
	return nil
}

func (m *memEndpoints) Stopped() bool { return m.halted }

func (m *memEndpoints) SetStopped(_ context.Context, stopped bool) error {
	m.halted = stopped
	m.runs[stopped]++
	return nil
}

// noSettings and noPublishing manage nothing: the documents here have
// endpoints only.
type (
	noSettings   struct{}
	noPublishing struct{}
)

func (noSettings) CheckSettings([]byte) (bool, error)          { return false, nil }
func (noSettings) ApplySettings(context.Context, []byte) error { return nil }

func (noPublishing) Destinations(context.Context) ([]store.Destination, error)   { return nil, nil }
func (noPublishing) Subscriptions(context.Context) ([]store.Subscription, error) { return nil, nil }
func (noPublishing) CheckDestination(store.Destination) error                    { return nil }
func (noPublishing) CheckSubscription(store.Subscription, string) error          { return nil }
func (noPublishing) DeleteDestination(context.Context, int64) error              { return nil }
func (noPublishing) CreateSubscription(context.Context, store.Subscription) error {
	return nil
}
func (noPublishing) DeleteSubscription(context.Context, int64) error { return nil }
func (noPublishing) Reload(context.Context)                          {}
func (noPublishing) PutDestination(_ context.Context, d store.Destination) (store.Destination, error) {
	return d, nil
}

// memMeta is Meta over a map.
type memMeta map[string]string

func (m memMeta) Meta(_ context.Context, key string) (string, error) {
	v, ok := m[key]
	if !ok {
		return "", store.ErrNotFound
	}
	return v, nil
}

func (m memMeta) SetMeta(_ context.Context, key, value string) error {
	m[key] = value
	return nil
}

// runDoc is a document with two managed endpoints, one of them disabled,
// and the given runState ("" for none).
func runDoc(runState string) json.RawMessage {
	rs := ""
	if runState != "" {
		rs = fmt.Sprintf(`"runState":%q,`, runState)
	}
	return json.RawMessage(fmt.Sprintf(`{"schemaVersion":1,%s"endpoints":[
		{"name":"plc1","protocol":"modbus","connection":{"host":"10.0.0.5"}},
		{"name":"plc2","protocol":"modbus","enabled":false,"connection":{"host":"10.0.0.6"}}]}`, rs))
}

// TestRunStateStopsAndRunsEndpoints applies a sequence of documents and
// checks, after each, the run state, how often the endpoints were
// stopped or run again, and that no definition was rewritten by a
// change of run state alone.
func TestRunStateStopsAndRunsEndpoints(t *testing.T) {
	ctx := context.Background()
	eps := &memEndpoints{stored: map[string]adapters.Endpoint{}, runs: map[bool]int{}}
	meta := memMeta{}
	r := New(eps, noSettings{}, noPublishing{}, slog.New(slog.DiscardHandler))
	steps := []struct {
		name    string
		version int64
		doc     json.RawMessage
		force   bool
		// wantStopped is the run state after the step; stops and runs
		// count SetStopped(true) and SetStopped(false) so far; puts the
		// endpoint writes so far.
		wantStopped bool
		stops, runs int
		puts        int
	}{
		{"running document creates the endpoints", 1, runDoc(""), false, false, 0, 0, 2},
		{"stopped stops them, rewrites nothing", 2, runDoc(control.RunStopped), false, true, 1, 0, 2},
		{"the same stopped document again changes nothing", 2, runDoc(control.RunStopped), false, true, 1, 0, 2},
		{"the same content under a new version changes nothing", 3, runDoc(control.RunStopped), false, true, 1, 0, 2},
		{"a forced re-apply at start changes nothing", 3, runDoc(control.RunStopped), true, true, 1, 0, 2},
		{"running runs them again, rewrites nothing", 4, runDoc(control.RunRunning), false, false, 1, 1, 2},
		{"absent runState is running: nothing changes", 5, runDoc(""), false, false, 1, 1, 2},
	}
	for _, s := range steps {
		if err := r.Apply(ctx, meta, s.version, s.doc, s.force); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if eps.halted != s.wantStopped || eps.runs[true] != s.stops || eps.runs[false] != s.runs || eps.puts != s.puts || eps.removes != 0 {
			t.Fatalf("%s: halted=%v stops=%d runs=%d puts=%d removes=%d", s.name, eps.halted, eps.runs[true], eps.runs[false], eps.puts, eps.removes)
		}
		want := control.RunRunning
		if s.wantStopped {
			want = control.RunStopped
		}
		if got := r.RunState(); got != want {
			t.Fatalf("%s: RunState() = %s, want %s", s.name, got, want)
		}
		// The disabled endpoint stays disabled: the run state never
		// touches an enabled flag.
		if eps.stored["plc2"].Enabled || !eps.stored["plc1"].Enabled {
			t.Fatalf("%s: enabled flags changed: %+v", s.name, eps.stored)
		}
	}
}

// TestRunStateSurvivesARestart: the run state is kept with the applied
// document, so a reconciler loading it after a restart knows it, and a
// stopped document re-applied at start finds the endpoints stopped
// already (the agent starts them stopped) and changes nothing.
func TestRunStateSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	eps := &memEndpoints{stored: map[string]adapters.Endpoint{}, runs: map[bool]int{}}
	meta := memMeta{}
	r := New(eps, noSettings{}, noPublishing{}, slog.New(slog.DiscardHandler))
	if err := r.Apply(ctx, meta, 1, runDoc(control.RunStopped), false); err != nil {
		t.Fatal(err)
	}
	if eps.runs[true] != 1 {
		t.Fatalf("stops = %d, want 1", eps.runs[true])
	}

	again := &memEndpoints{stored: eps.stored, runs: map[bool]int{}}
	r2 := New(again, noSettings{}, noPublishing{}, slog.New(slog.DiscardHandler))
	if got := r2.RunState(); got != control.RunRunning {
		t.Fatalf("RunState before Load = %s", got)
	}
	if err := r2.Load(ctx, meta); err != nil {
		t.Fatal(err)
	}
	if got := r2.RunState(); got != control.RunStopped {
		t.Fatalf("RunState after Load = %s, want stopped", got)
	}
	again.halted = true // as the adapters phase starts them
	if err := r2.Apply(ctx, meta, 1, runDoc(control.RunStopped), true); err != nil {
		t.Fatal(err)
	}
	if again.puts != 0 || again.runs[true] != 0 || again.runs[false] != 0 {
		t.Fatalf("re-apply at start: puts=%d runs=%v", again.puts, again.runs)
	}
	// Had they started (an agent no longer provisioned when it started,
	// then provisioned again), the same document stops them.
	again.halted = false
	if err := r2.Apply(ctx, meta, 1, runDoc(control.RunStopped), false); err != nil {
		t.Fatal(err)
	}
	if !again.halted || again.runs[true] != 1 {
		t.Fatalf("same version with endpoints running: halted=%v runs=%v", again.halted, again.runs)
	}
}
