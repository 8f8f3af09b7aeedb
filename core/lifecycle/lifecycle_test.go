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
