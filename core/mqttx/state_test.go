package mqttx

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name      string
		base, max time.Duration
		attempts  []int
		want      []time.Duration
	}{
		{"spec schedule 1,2,4 then 8", s, 8 * s, []int{1, 2, 3, 4, 5, 6, 20}, []time.Duration{s, 2 * s, 4 * s, 8 * s, 8 * s, 8 * s, 8 * s}},
		{"test schedule", 20 * time.Millisecond, 160 * time.Millisecond, []int{1, 2, 3, 4, 5}, []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond, 160 * time.Millisecond}},
		{"cap not a power of two of base", s, 5 * s, []int{1, 2, 3, 4}, []time.Duration{s, 2 * s, 4 * s, 5 * s}},
		{"base equals max", s, s, []int{1, 2, 3}, []time.Duration{s, s, s}},
		{"attempt below 1 is the first", s, 8 * s, []int{0, -3}, []time.Duration{s, s}},
		{"huge attempt does not overflow", s, 8 * s, []int{1 << 20}, []time.Duration{8 * s}},
		{"huge max does not overflow", s, time.Duration(1<<62 + 1), []int{200}, []time.Duration{time.Duration(1<<62 + 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, n := range tt.attempts {
				if got := Backoff(tt.base, tt.max, n); got != tt.want[i] {
					t.Errorf("Backoff(%s, %s, %d) = %s, want %s", tt.base, tt.max, n, got, tt.want[i])
				}
			}
		})
	}
}

func TestStateMachine(t *testing.T) {
	const s = time.Second
	type step struct {
		ev       event
		state    State
		failures int
		wait     time.Duration // wait in the state reached
	}
	tests := []struct {
		name        string
		maxAttempts int
		steps       []step
	}{
		{"first attempt succeeds", 3, []step{
			{evStart, StateConnecting, 0, 0},
			{evConnected, StateConnected, 0, 0},
		}},
		{"broker down at start: reconnecting like a drop, first failure not counted", 3, []step{
			{evStart, StateConnecting, 0, 0},
			{evAttemptFailed, StateReconnecting, 0, s},
			{evAttemptFailed, StateReconnecting, 1, 2 * s},
			{evConnected, StateConnected, 0, 0},
		}},
		{"drop, backoff 1,2,4,8,8, success resets", 0, []step{
			{evStart, StateConnecting, 0, 0},
			{evConnected, StateConnected, 0, 0},
			{evConnectionLost, StateReconnecting, 0, s},
			{evAttemptFailed, StateReconnecting, 1, 2 * s},
			{evAttemptFailed, StateReconnecting, 2, 4 * s},
			{evAttemptFailed, StateReconnecting, 3, 8 * s},
			{evAttemptFailed, StateReconnecting, 4, 8 * s},
			{evAttemptFailed, StateReconnecting, 5, 8 * s},
			{evConnected, StateConnected, 0, 0},
			{evConnectionLost, StateReconnecting, 0, s},
		}},
		{"max attempts → fatal, cooldown → reconnecting with counters reset", 3, []step{
			{evStart, StateConnecting, 0, 0},
			{evConnected, StateConnected, 0, 0},
			{evConnectionLost, StateReconnecting, 0, s},
			{evAttemptFailed, StateReconnecting, 1, 2 * s},
			{evAttemptFailed, StateReconnecting, 2, 4 * s},
			{evAttemptFailed, StateFatal, 3, time.Minute},
			{evAttemptFailed, StateFatal, 3, time.Minute}, // ignored in fatal
			{evCooldownElapsed, StateReconnecting, 0, s},
			{evAttemptFailed, StateReconnecting, 1, 2 * s},
			{evConnected, StateConnected, 0, 0},
		}},
		{"max 1: one failed reconnect is fatal", 1, []step{
			{evStart, StateConnecting, 0, 0},
			{evAttemptFailed, StateReconnecting, 0, s},
			{evAttemptFailed, StateFatal, 1, time.Minute},
		}},
		{"events that do not apply are ignored", 3, []step{
			{evConnected, StateStopped, 0, 0},
			{evConnectionLost, StateStopped, 0, 0},
			{evStart, StateConnecting, 0, 0},
			{evStart, StateConnecting, 0, 0},
			{evConnectionLost, StateConnecting, 0, 0},
			{evCooldownElapsed, StateConnecting, 0, 0},
			{evConnected, StateConnected, 0, 0},
			{evAttemptFailed, StateConnected, 0, 0},
		}},
		{"stop from any state", 3, []step{
			{evStart, StateConnecting, 0, 0},
			{evAttemptFailed, StateReconnecting, 0, s},
			{evStop, StateStopped, 0, 0},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := machine{p: policy{base: s, max: 8 * s, maxAttempts: tt.maxAttempts, cooldown: time.Minute}}
			for i, st := range tt.steps {
				from := m.state
				gotFrom, gotTo := m.apply(st.ev)
				if gotFrom != from || gotTo != st.state || m.failures != st.failures || m.wait() != st.wait {
					t.Fatalf("step %d (event %d from %s): got %s→%s failures %d wait %s, want →%s failures %d wait %s",
						i, st.ev, from, gotFrom, gotTo, m.failures, m.wait(), st.state, st.failures, st.wait)
				}
			}
		})
	}
}

func TestStateString(t *testing.T) {
	want := map[State]string{StateStopped: "stopped", StateConnecting: "connecting", StateConnected: "connected",
		StateReconnecting: "reconnecting", StateFatal: "fatal", State(99): "unknown", State(-1): "unknown"}
	for s, w := range want {
		if s.String() != w {
			t.Errorf("State(%d).String() = %q, want %q", int(s), s.String(), w)
		}
	}
	if len(States()) != 5 {
		t.Errorf("States() = %v", States())
	}
}
