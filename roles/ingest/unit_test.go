package ingest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestWindowP95(t *testing.T) {
	w := newWindow(100)
	if w.p95ms() != 0 {
		t.Error("empty window should report 0")
	}
	for i := 1; i <= 100; i++ {
		w.observe(time.Duration(i) * time.Millisecond)
	}
	if got := w.p95ms(); got != 95 {
		t.Errorf("p95 = %g, want 95", got)
	}
	for range 100 { // the old samples roll out
		w.observe(time.Millisecond)
	}
	if got := w.p95ms(); got != 1 {
		t.Errorf("p95 after roll-over = %g, want 1", got)
	}
}

func TestIsDataError(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "22021"}, true}, // invalid byte sequence
		{&pgconn.PgError{Code: "23502"}, true}, // not null violation
		{fmt.Errorf("insert readings: %w", &pgconn.PgError{Code: "22P02"}), true},
		{&pgconn.PgError{Code: "57P01"}, false}, // admin shutdown
		{&pgconn.PgError{Code: "42P01"}, false}, // table missing: the backend's problem
		{&pgconn.PgError{Code: "53100"}, false}, // disk full
		{errors.New("connection refused"), false},
		{context.DeadlineExceeded, false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := isDataError(tt.err); got != tt.want {
			t.Errorf("isDataError(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
