package registry

import (
	"testing"
	"time"
)

func TestStatusOf(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(-d); return &x }
	tests := []struct {
		name     string
		active   bool
		lastSeen *time.Time
		want     string
	}{
		{"disabled wins over traffic", false, at(0), StatusDisabled},
		{"disabled, never seen", false, nil, StatusDisabled},
		{"never seen", true, nil, StatusNeverSeen},
		{"zero time is never seen", true, &time.Time{}, StatusNeverSeen},
		{"just now", true, at(0), StatusOnline},
		{"at the silence", true, at(30 * time.Second), StatusOnline},
		{"past the silence", true, at(30*time.Second + time.Millisecond), StatusOffline},
		{"clock ahead", true, at(-time.Minute), StatusOnline},
	}
	for _, tt := range tests {
		if got := StatusOf(tt.active, tt.lastSeen, now, DefaultOfflineAfter); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
