package ingest

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/edgeplat/edgeplat/config"
)

func TestWriteConcurrency(t *testing.T) {
	cpus := runtime.GOMAXPROCS(0)
	tests := []struct {
		name string
		in   config.Ingest
		want int
	}{
		{"auto in copy mode is the CPUs", config.Ingest{InsertMode: "copy"}, cpus},
		{"auto in insert mode is unbounded", config.Ingest{InsertMode: "insert"}, 0},
		{"auto in realtime mode is unbounded", config.Ingest{InsertMode: "realtime"}, 0},
		{"set wins in copy mode", config.Ingest{InsertMode: "copy", WriteConcurrency: 7}, 7},
		{"set wins in realtime mode", config.Ingest{InsertMode: "realtime", WriteConcurrency: 3}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := writeConcurrency(tt.in); got != tt.want {
				t.Errorf("writeConcurrency = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestWriteSlotsBound: with every slot taken, a writer waits, gives up
// when its context ends, and gets a slot once one is released.
func TestWriteSlotsBound(t *testing.T) {
	e := &engine{writeSlots: make(chan struct{}, 2)}
	ctx := context.Background()
	for range 2 {
		if err := e.acquireWrite(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.acquireWrite(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire with every slot taken and a cancelled context = %v", err)
	}
	e.releaseWrite()
	if err := e.acquireWrite(ctx); err != nil {
		t.Fatalf("acquire after a release: %v", err)
	}
	unbounded := &engine{}
	for range 100 {
		if err := unbounded.acquireWrite(ctx); err != nil {
			t.Fatal(err)
		}
	}
	unbounded.releaseWrite()
}
