package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder logs the order of lifecycle calls across services.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

type fakeOpts struct {
	startErr error
	runErr   error // returned by Run right away when set
	runNil   bool  // Run returns nil right away
	stopErr  error
	hangStop bool // Stop ignores its deadline and Run never ends
}

func fake(rec *recorder, name string, o fakeOpts) Service {
	hang := make(chan struct{})
	return &Funcs{
		ServiceName: name,
		StartFunc: func(context.Context) error {
			rec.add("start " + name)
			return o.startErr
		},
		RunFunc: func(ctx context.Context) error {
			switch {
			case o.runErr != nil:
				return o.runErr
			case o.runNil:
				return nil
			case o.hangStop:
				<-hang
				return nil
			}
			<-ctx.Done()
			return nil
		},
		StopFunc: func(ctx context.Context) error {
			rec.add("stop " + name)
			if o.hangStop {
				// Release the Run goroutine only after the grace period,
				// so the runner must give up waiting but nothing leaks.
				go func() { time.Sleep(200 * time.Millisecond); close(hang) }()
			}
			return o.stopErr
		},
	}
}

func TestRun(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name       string
		opts       map[string]fakeOpts
		cancel     bool // cancel the context after start, as SIGTERM does
		wantEvents []string
		wantErr    string
		wantPhase  string
	}{
		{
			name:       "clean shutdown stops in reverse order",
			cancel:     true,
			wantEvents: []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"},
		},
		{
			name:       "start failure stops the started ones",
			opts:       map[string]fakeOpts{"b": {startErr: boom}},
			wantEvents: []string{"start a", "start b", "stop a"},
			wantErr:    "b start: boom",
			wantPhase:  "start",
		},
		{
			name:       "run failure stops everything",
			opts:       map[string]fakeOpts{"b": {runErr: boom}},
			wantEvents: []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"},
			wantErr:    "b run: boom",
			wantPhase:  "run",
		},
		{
			name:       "early exit is a failure",
			opts:       map[string]fakeOpts{"c": {runNil: true}},
			wantEvents: []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"},
			wantErr:    "c run: exited before shutdown was requested",
			wantPhase:  "run",
		},
		{
			name:       "a requested shutdown stops everything cleanly",
			opts:       map[string]fakeOpts{"b": {runErr: fmt.Errorf("agent: %w", ErrShutdownRequested)}},
			wantEvents: []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"},
		},
		{
			name:       "stop errors are reported",
			cancel:     true,
			opts:       map[string]fakeOpts{"a": {stopErr: boom}},
			wantEvents: []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"},
			wantErr:    "a stop: boom",
			wantPhase:  "stop",
		},
		{
			name:       "a service that will not stop is reported after the grace period",
			cancel:     true,
			opts:       map[string]fakeOpts{"b": {hangStop: true}},
			wantEvents: []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"},
			wantErr:    "still running after the 50ms grace period",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			var svcs []Service
			for _, n := range []string{"a", "b", "c"} {
				svcs = append(svcs, fake(rec, n, tt.opts[n]))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				go func() {
					for len(rec.get()) < 3 {
						time.Sleep(time.Millisecond)
					}
					cancel()
				}()
			}
			err := Run(ctx, Options{GracePeriod: 50 * time.Millisecond}, svcs...)
			if got := rec.get(); !slices.Equal(got, tt.wantEvents) {
				t.Errorf("events = %v, want %v", got, tt.wantEvents)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Run = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Run = %v, want %q", err, tt.wantErr)
			}
			if tt.wantPhase != "" {
				var se *ServiceError
				if !errors.As(err, &se) || se.Phase != tt.wantPhase {
					t.Errorf("error %v is not a %s ServiceError", err, tt.wantPhase)
				}
			}
			if tt.opts["b"].hangStop {
				time.Sleep(300 * time.Millisecond) // let the hung Run end before goleak looks
			}
		})
	}
}

func TestRunRejectsDuplicateNames(t *testing.T) {
	rec := &recorder{}
	err := Run(context.Background(), Options{}, fake(rec, "x", fakeOpts{}), fake(rec, "x", fakeOpts{}))
	if err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("Run = %v, want duplicate name error", err)
	}
	if len(rec.get()) != 0 {
		t.Errorf("nothing should start, got %v", rec.get())
	}
}

// resource stands for what a service's Start acquires and Stop releases: a
// file, a pool. Using it after Close is the bug Stop-after-Run prevents.
type resource struct {
	mu          sync.Mutex
	closed      bool
	usedClosed  int
	closeCalled chan struct{}
}

func (r *resource) use() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.usedClosed++
	}
}

func (r *resource) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	close(r.closeCalled)
}

// TestStopFollowsRun has a Run that keeps writing for a moment after its
// context ends, as a worker finishing its batch does. Stop must come only
// after that last write: with Stop called as soon as the context ends, the
// write would land on a closed resource.
func TestStopFollowsRun(t *testing.T) {
	res := &resource{closeCalled: make(chan struct{})}
	writer := &Funcs{
		ServiceName: "writer",
		RunFunc: func(ctx context.Context) error {
			for ctx.Err() == nil {
				res.use()
				Sleep(ctx, time.Millisecond)
			}
			// The last batch: it takes a while, and must not meet a
			// closed resource. A Stop that does not wait closes it
			// meanwhile, which the select sees at once.
			select {
			case <-res.closeCalled:
			case <-time.After(50 * time.Millisecond):
			}
			res.use()
			return nil
		},
		StopFunc: func(context.Context) error { res.close(); return nil },
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if err := Run(ctx, Options{GracePeriod: time.Second}, writer); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if res.usedClosed != 0 {
		t.Fatalf("Run used the resource %d times after Stop closed it", res.usedClosed)
	}
}

// TestStopsOneServiceAtATime checks that a service keeps its context until
// every service after it has stopped: the API subscriber must be gone
// before the broker it reads from stops.
func TestStopsOneServiceAtATime(t *testing.T) {
	var brokerCtx context.Context
	started := make(chan struct{})
	broker := &Funcs{ServiceName: "broker", RunFunc: func(ctx context.Context) error {
		brokerCtx = ctx
		close(started)
		<-ctx.Done()
		return nil
	}}
	var brokerDoneAtStop error
	subscriber := &Funcs{ServiceName: "subscriber", StopFunc: func(context.Context) error {
		brokerDoneAtStop = brokerCtx.Err()
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	if err := Run(ctx, Options{}, broker, subscriber); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if brokerDoneAtStop != nil {
		t.Fatalf("the broker's context ended (%v) before the subscriber stopped", brokerDoneAtStop)
	}
}

func TestOnStartAndRunAgain(t *testing.T) {
	rec := &recorder{}
	boom := errors.New("boom")
	var starts []string
	opts := Options{OnStart: func(name string, _ time.Duration, err error) {
		starts = append(starts, fmt.Sprintf("%s:%v", name, err))
	}}
	fail := true
	flaky := &Funcs{ServiceName: "flaky", StartFunc: func(context.Context) error {
		if fail {
			return boom
		}
		return nil
	}}
	svcs := []Service{fake(rec, "a", fakeOpts{}), flaky}
	if err := Run(context.Background(), opts, svcs...); !errors.Is(err, boom) {
		t.Fatalf("first Run = %v, want %v", err, boom)
	}
	fail = false
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for len(rec.get()) < 3 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if err := Run(ctx, opts, svcs...); err != nil {
		t.Fatalf("second Run = %v", err)
	}
	if want := []string{"a:<nil>", "flaky:boom", "a:<nil>", "flaky:<nil>"}; !slices.Equal(starts, want) {
		t.Errorf("OnStart saw %v, want %v", starts, want)
	}
	if want := []string{"start a", "stop a", "start a", "stop a"}; !slices.Equal(rec.get(), want) {
		t.Errorf("events = %v, want %v", rec.get(), want)
	}
}

// TestNestedRunSharesTheDeadline checks that a group run inside a service
// (the agent's init phases) stops within the outer stop phase, and that
// DrainContext outside any Run still has a deadline.
func TestNestedRunSharesTheDeadline(t *testing.T) {
	var innerDrain time.Time
	inner := &Funcs{ServiceName: "inner", RunFunc: func(ctx context.Context) error {
		<-ctx.Done()
		d, cancel := DrainContext(ctx)
		defer cancel()
		innerDrain, _ = d.Deadline()
		return nil
	}}
	group := &Funcs{ServiceName: "group", RunFunc: func(ctx context.Context) error {
		return Run(ctx, Options{GracePeriod: time.Hour}, inner)
	}}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	t0 := time.Now()
	if err := Run(ctx, Options{GracePeriod: time.Minute}, group); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if innerDrain.IsZero() || innerDrain.After(t0.Add(time.Minute+time.Second)) {
		t.Errorf("inner drain deadline %v, want within the outer minute from %v", innerDrain, t0)
	}
	d, cancel2 := DrainContext(context.Background())
	defer cancel2()
	if _, ok := d.Deadline(); !ok {
		t.Error("DrainContext outside Run has no deadline")
	}
}
