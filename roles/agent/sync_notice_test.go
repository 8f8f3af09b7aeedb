package agent

import (
	"log/slog"
	"testing"
)

// TestTargetStateNoticesCoalesce: notices arriving while the sync loop
// is busy leave one pull pending, never a queue of them; an undecodable
// notice asks for none.
func TestTargetStateNoticesCoalesce(t *testing.T) {
	s := &cloudService{log: slog.New(slog.DiscardHandler), kick: make(chan struct{}, 1)}
	s.targetStateNotice(t.Context(), []byte(`{"version":-1}`))
	if len(s.kick) != 0 {
		t.Fatal("an invalid notice asked for a pull")
	}
	for v := range 5 {
		s.targetStateNotice(t.Context(), []byte(`{"version":`+string(rune('1'+v))+`}`))
	}
	if len(s.kick) != 1 {
		t.Fatalf("%d pulls pending after 5 notices, want 1", len(s.kick))
	}
}
