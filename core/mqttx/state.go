package mqttx

import "time"

// State is where the client's connection state machine is.
type State int

// Client states. The zero value is StateStopped: a client that was never
// started reports it too.
const (
	// StateStopped: not started yet, or stopped.
	StateStopped State = iota
	// StateConnecting: the first connection attempt after Start is under way.
	StateConnecting
	// StateConnected: connected, subscriptions (re)made, the queue flowing.
	StateConnected
	// StateReconnecting: waiting out the backoff before, or making, another
	// attempt after a lost connection or a failed attempt.
	StateReconnecting
	// StateFatal: MaxReconnectAttempts consecutive attempts failed; the
	// client waits FatalRecoveryCooldown, then reconnects with counters reset.
	StateFatal
)

var stateNames = [...]string{"stopped", "connecting", "connected", "reconnecting", "fatal"}

// String returns the lowercase name used in logs, metrics and /health.
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "unknown"
	}
	return stateNames[s]
}

// States lists every state, for metrics that expose one series per state.
func States() []State {
	return []State{StateStopped, StateConnecting, StateConnected, StateReconnecting, StateFatal}
}

// Backoff returns the wait before reconnect attempt number attempt (1-based)
// of one outage: base, 2·base, 4·base, ... capped at max. With the defaults
// that is 1 s, 2 s, 4 s, then 8 s.
func Backoff(base, max time.Duration, attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := base
	for i := 1; i < attempt; i++ {
		if d >= max || d > max/2 {
			return max
		}
		d *= 2
	}
	if d > max {
		return max
	}
	return d
}

// event moves the state machine.
type event int

const (
	evStart           event = iota // Start was called
	evConnected                    // an attempt succeeded (connected, subscribed)
	evAttemptFailed                // an attempt failed
	evConnectionLost               // an established connection ended
	evCooldownElapsed              // the fatal cooldown is over
	evStop                         // Stop was called
)

// policy is the part of Options the state machine needs.
type policy struct {
	base, max   time.Duration // reconnect backoff
	maxAttempts int           // consecutive failed reconnects before fatal; 0 = unlimited
	cooldown    time.Duration // in fatal before reconnecting
}

// machine is the pure state machine: no clock, no I/O, so a table test can
// walk it. The client owns one and feeds it events from its Run goroutine.
//
// The rules:
//   - connecting: the first attempt starts at once. Success → connected;
//     failure → reconnecting, as if a connection had dropped (it does not
//     count against MaxReconnectAttempts: it was not a reconnect).
//   - connected: connection lost → reconnecting, failures = 0.
//   - reconnecting: wait Backoff(failures+1), attempt. Success → connected,
//     failures = 0; failure → failures+1, and fatal once failures reaches
//     maxAttempts (when maxAttempts > 0).
//   - fatal: wait cooldown → reconnecting with failures = 0.
//   - any state: stop → stopped.
type machine struct {
	p        policy
	state    State
	failures int // consecutive failed reconnect attempts in this outage
}

// apply feeds ev to the machine and returns the state before and after.
// Events that do not apply to the current state are ignored.
func (m *machine) apply(ev event) (from, to State) {
	from = m.state
	switch ev {
	case evStart:
		if m.state == StateStopped {
			m.state, m.failures = StateConnecting, 0
		}
	case evConnected:
		if m.state == StateConnecting || m.state == StateReconnecting {
			m.state, m.failures = StateConnected, 0
		}
	case evAttemptFailed:
		switch m.state {
		case StateConnecting:
			m.state, m.failures = StateReconnecting, 0
		case StateReconnecting:
			m.failures++
			if m.p.maxAttempts > 0 && m.failures >= m.p.maxAttempts {
				m.state = StateFatal
			}
		}
	case evConnectionLost:
		if m.state == StateConnected {
			m.state, m.failures = StateReconnecting, 0
		}
	case evCooldownElapsed:
		if m.state == StateFatal {
			m.state, m.failures = StateReconnecting, 0
		}
	case evStop:
		m.state = StateStopped
	}
	return from, m.state
}

// wait is how long the machine waits in its current state before the next
// attempt (connecting, reconnecting) or before recovering (fatal). It is
// zero for connected and stopped, which wait for events instead.
func (m *machine) wait() time.Duration {
	switch m.state {
	case StateReconnecting:
		return Backoff(m.p.base, m.p.max, m.failures+1)
	case StateFatal:
		return m.p.cooldown
	default:
		return 0
	}
}
