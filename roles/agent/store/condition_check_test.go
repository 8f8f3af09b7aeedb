package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestQuickCheckFailureIsNotCorruption (issue 16 fix-agent item 1): a
// quick check that could not run is no evidence of corruption, so it must
// not mark the store corrupt nor call the handler (a soft reboot); a
// verdict other than "ok" still does.
func TestQuickCheckFailureIsNotCorruption(t *testing.T) {
	expired := func(ctx context.Context) (string, error) {
		ctx, cancel := context.WithDeadline(ctx, time.Unix(0, 0))
		defer cancel()
		<-ctx.Done()
		return "", fmt.Errorf("quick check: %w", ctx.Err())
	}
	tests := []struct {
		name        string
		check       func(*Store) func(context.Context) (string, error)
		wantCorrupt bool
	}{
		{"database closed", func(s *Store) func(context.Context) (string, error) {
			if err := s.db.Close(); err != nil {
				t.Fatal(err)
			}
			return nil // the real quick check, on the closed database
		}, false},
		{"deadline", func(*Store) func(context.Context) (string, error) { return expired }, false},
		{"io error", func(*Store) func(context.Context) (string, error) {
			return func(context.Context) (string, error) {
				return "", fmt.Errorf("quick check: %w", &fs.PathError{Op: "read", Path: "agent.db", Err: syscall.EIO})
			}
		}, false},
		{"passed", func(*Store) func(context.Context) (string, error) {
			return func(context.Context) (string, error) { return "ok", nil }
		}, false},
		{"damaged", func(*Store) func(context.Context) (string, error) {
			return func(context.Context) (string, error) {
				return "*** in database main ***\nPage 7: btreeInitPage() returns error code 11", nil
			}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(t.Context(), t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var called atomic.Int32
			s.OnCorruption(func(string) { called.Add(1) })
			s.cond.check = tt.check(s)
			s.cond.confirmCorruption(errors.New("database disk image is malformed"))
			s.cond.mu.Lock()
			corrupt := s.cond.corrupt
			s.cond.mu.Unlock()
			if got := corrupt != ""; got != tt.wantCorrupt {
				t.Errorf("marked corrupt = %v (%q), want %v", got, corrupt, tt.wantCorrupt)
			}
			if got := called.Load() == 1; got != tt.wantCorrupt {
				t.Errorf("handler called %d times, want called = %v", called.Load(), tt.wantCorrupt)
			}
			if tt.wantCorrupt && !strings.Contains(corrupt, "btreeInitPage") {
				t.Errorf("reason %q does not carry the finding", corrupt)
			}
			if s.cond.checking.Load() {
				t.Error("check still marked as running")
			}
		})
	}
}

// TestCloseWaitsForCorruptionCheck (issue 16 fix-agent item 1): Close
// cancels a running quick check and returns only once it ended, so no
// check runs against a closed store, and a check cut short by Close does
// not report corruption.
func TestCloseWaitsForCorruptionCheck(t *testing.T) {
	s, err := Open(t.Context(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var called atomic.Int32
	s.OnCorruption(func(string) { called.Add(1) })
	started, ended := make(chan struct{}), make(chan struct{})
	s.cond.check = func(ctx context.Context) (string, error) {
		close(started)
		defer close(ended)
		<-ctx.Done()
		return "", fmt.Errorf("quick check: %w", ctx.Err())
	}
	s.cond.startCheck(errors.New("database disk image is malformed"))
	<-started
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	default:
		t.Fatal("Close returned while the quick check was still running")
	}
	// The deferred reset of checking follows the check's return; Close
	// must have waited for the whole goroutine.
	if s.cond.checking.Load() {
		t.Fatal("check goroutine outlived Close")
	}
	if called.Load() != 0 {
		t.Fatal("a check cancelled by Close reported corruption")
	}
	// After Close no new check starts.
	s.cond.check = func(context.Context) (string, error) {
		t.Error("quick check started after Close")
		return "ok", nil
	}
	s.cond.startCheck(errors.New("database disk image is malformed"))
	if s.cond.checking.Load() {
		t.Fatal("a check refused after Close left the check flag set")
	}
}
