package runner

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is an in-process adapter whose behaviour the test sets: it
// exercises the runner's state machine, which is protocol independent.
// The protocol adapters are tested against real servers in their own
// packages.
type script struct {
	mu         sync.Mutex
	connectErr error
	pollErr    error
	value      float64
	connects   int
	closes     int
	listen     bool
	listenErr  error
}

type scriptDriver struct{ s *script }

func (d scriptDriver) Protocol() string { return "script" }
func (d scriptDriver) Validate(ep adapters.Endpoint) error {
	if len(ep.DataPoints) == 0 {
		return adapters.Fieldf("data_points", "at least one is required")
	}
	return nil
}
func (d scriptDriver) New(adapters.Endpoint, adapters.Env) (adapters.Adapter, error) { return d.s, nil }

func (s *script) Connect(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connects++
	return s.connectErr
}

func (s *script) Poll(context.Context) ([]adapters.Reading, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.pollErr != nil {
		return []adapters.Reading{{Metric: "v", Timestamp: now, Quality: adapters.Bad, QualityCode: adapters.Classify(s.pollErr)}}, s.pollErr
	}
	return []adapters.Reading{{Metric: "v", Value: s.value, Timestamp: now, Quality: adapters.Good}}, nil
}

func (s *script) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closes++
	return nil
}

func (s *script) set(f func(s *script)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

type listeningScript struct{ *script }

func (l listeningScript) Listen(ctx context.Context, emit func([]adapters.Reading)) error {
	if !l.listen {
		return adapters.ErrPollOnly
	}
	l.mu.Lock()
	lerr := l.listenErr
	l.mu.Unlock()
	if lerr != nil {
		return lerr
	}
	emit([]adapters.Reading{{Metric: "pushed", Value: 1.0, Quality: adapters.Good, Timestamp: time.Now()}})
	<-ctx.Done()
	return nil
}

type listenDriver struct{ s *script }

func (d listenDriver) Protocol() string                 { return "listen" }
func (d listenDriver) Validate(adapters.Endpoint) error { return nil }
func (d listenDriver) New(adapters.Endpoint, adapters.Env) (adapters.Adapter, error) {
	return listeningScript{d.s}, nil
}

// sink records what the runner outputs.
type sink struct {
	mu           sync.Mutex
	readings     []adapters.Reading
	disconnected int
	stopped      int
}

func (k *sink) Readings(_ context.Context, _ adapters.Endpoint, rs []adapters.Reading) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.readings = append(k.readings, rs...)
}
func (k *sink) Disconnected(context.Context, adapters.Endpoint) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.disconnected++
}
func (k *sink) Stopped(adapters.Endpoint) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped++
}

func (k *sink) last() (adapters.Reading, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.readings) == 0 {
		return adapters.Reading{}, 0
	}
	return k.readings[len(k.readings)-1], len(k.readings)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var refused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

func endpoint(protocol string) adapters.Endpoint {
	return adapters.Endpoint{UUID: "u1", Name: "dev-1", Protocol: protocol, Enabled: true, PollIntervalMS: 10,
		DataPoints: []adapters.DataPoint{{Name: "v", Register: "holding:0"}}}
}

func TestPollOutageAndRecovery(t *testing.T) {
	s := &script{value: 42}
	k := &sink{}
	r := New([]adapters.Driver{scriptDriver{s}}, k, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Start(ctx)
	if err := r.Apply(endpoint("script")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a GOOD reading", func() bool { rd, _ := k.last(); return rd.Quality == adapters.Good && rd.Value == 42.0 })
	if h, _ := r.Health("u1"); h.State != StateConnected || !h.Connected || h.CommunicationQuality != 100 {
		t.Fatalf("health while polling = %+v", h)
	}

	// The device goes away: the poll fails, later connects are refused.
	s.set(func(s *script) { s.pollErr, s.connectErr = refused, refused })
	waitFor(t, "BAD readings with CONNECTION_REFUSED", func() bool {
		rd, _ := k.last()
		h, _ := r.Health("u1")
		return rd.Quality == adapters.Bad && rd.QualityCode == adapters.CodeConnectionRefused && h.State != StateConnected
	})
	if h, _ := r.Health("u1"); h.Connected || h.LastError == "" {
		t.Fatalf("health during the outage = %+v", h)
	}
	k.mu.Lock()
	if k.disconnected == 0 {
		t.Error("Disconnected was not reported")
	}
	k.mu.Unlock()

	// It comes back: values return without restarting anything.
	s.set(func(s *script) { s.pollErr, s.connectErr, s.value = nil, nil, 43 })
	waitFor(t, "GOOD readings again", func() bool { rd, _ := k.last(); return rd.Quality == adapters.Good && rd.Value == 43.0 })
	m, err := r.DeviceMetrics("script", "dev-1")
	if err != nil || m.Polls == 0 || m.ReadsBad == 0 || m.PollFailures == 0 {
		t.Fatalf("metrics = %+v, %v", m, err)
	}
	d, err := r.Device("script", "dev-1")
	if err != nil || len(d.DataPoints) != 1 || d.DataPoints[0].Value != 43.0 {
		t.Fatalf("device = %+v, %v", d, err)
	}

	r.Remove("u1")
	if _, ok := r.Health("u1"); ok {
		t.Fatal("removed endpoint still has health")
	}
	_, n := k.last()
	time.Sleep(50 * time.Millisecond)
	if _, n2 := k.last(); n2 != n {
		t.Fatal("readings after Remove")
	}
	s.mu.Lock()
	if s.closes < s.connects {
		t.Errorf("%d connects but %d closes", s.connects, s.closes)
	}
	s.mu.Unlock()
}

func TestListenerAndPollOnly(t *testing.T) {
	k := &sink{}
	s := &script{value: 7, listen: true}
	r := New([]adapters.Driver{listenDriver{s}}, k, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Start(ctx)
	if err := r.Apply(endpoint("listen")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a pushed reading", func() bool { rd, _ := k.last(); return rd.Metric == "pushed" })
	if _, err := r.DeviceMetrics("listen", "dev-1"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("metrics of a listening device: err = %v, want ErrUnsupported", err)
	}
	s.set(func(s *script) { s.listen = false })
	// Re-applying restarts it; now the adapter asks to be polled.
	if err := r.Apply(endpoint("listen")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a polled reading", func() bool { rd, _ := k.last(); return rd.Metric == "v" })
	if _, err := r.DeviceMetrics("listen", "dev-1"); err != nil {
		t.Fatalf("metrics of a polled device: %v", err)
	}
	r.StopAll()
}

func TestValidateAndApply(t *testing.T) {
	r := New([]adapters.Driver{scriptDriver{&script{}}}, &sink{}, nil, nil)
	var fe *adapters.FieldError
	if err := r.Validate(adapters.Endpoint{Protocol: "bacnet"}); !errors.As(err, &fe) || fe.Field != "protocol" {
		t.Fatalf("unknown protocol: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Start(ctx)
	ep := endpoint("script")
	ep.Enabled = false
	if err := r.Apply(ep); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Health("u1"); ok {
		t.Fatal("a disabled endpoint runs")
	}
	if _, err := r.Device("script", "dev-1"); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Device of a stopped endpoint: %v", err)
	}
}

func TestBackoff(t *testing.T) {
	b := newBackoff(time.Second, 8*time.Second)
	for i, want := range []time.Duration{1, 2, 4, 8, 8} {
		d := b.Next()
		lo, hi := want*time.Second*8/10, want*time.Second*12/10
		if d < lo || d > hi {
			t.Errorf("attempt %d: %v, want within [%v, %v]", i, d, lo, hi)
		}
	}
	b.Reset()
	if d := b.Next(); d > 1200*time.Millisecond {
		t.Errorf("after Reset: %v", d)
	}
}

func TestLostListenerTurnsPointsBad(t *testing.T) {
	k := &sink{}
	s := &script{listen: true, listenErr: refused}
	r := New([]adapters.Driver{listenDriver{s}}, k, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Start(ctx)
	if err := r.Apply(endpoint("listen")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a BAD reading after the listener lost its connection", func() bool {
		rd, _ := k.last()
		return rd.Metric == "v" && rd.Quality == adapters.Bad && rd.QualityCode == adapters.CodeConnectionRefused
	})
	// A listening endpoint has no poll metrics, connected or not.
	if _, err := r.DeviceMetrics("listen", "dev-1"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("metrics of a listening endpoint: %v", err)
	}
	r.StopAll()
}
