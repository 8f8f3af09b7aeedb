package lifecycle

import (
	"context"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want bool
	}{
		{"passes", context.Background(), time.Millisecond, true},
		{"no wait", context.Background(), 0, true},
		{"negative", context.Background(), -time.Second, true},
		{"ended context", ended, time.Hour, false},
		{"ended context, no wait", ended, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sleep(tt.ctx, tt.d); got != tt.want {
				t.Fatalf("Sleep = %v, want %v", got, tt.want)
			}
		})
	}
	// A context that ends during the wait cuts it short.
	ctx, cancelSoon := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancelSoon()
	done := make(chan bool, 1)
	go func() { done <- Sleep(ctx, time.Hour) }()
	select {
	case got := <-done:
		if got {
			t.Fatal("Sleep reported a full wait after its context ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Sleep did not return when its context ended")
	}
}
