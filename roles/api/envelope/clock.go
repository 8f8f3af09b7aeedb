package envelope

import (
	"time"
)

// ClockWindow is how far a reading's time may lie from the moment the
// Cloud API receives it. Agents' clocks drift or are set wrong: a clock a
// day ahead stored every reading a day ahead, and /readings/latest then
// showed tomorrow's value as the latest.
type ClockWindow struct {
	// MaxFuture is the most a reading may be ahead of the receive time;
	// later readings are refused. Zero means no bound.
	MaxFuture time.Duration
	// MaxPast is the age past which a reading is counted as old. It is
	// still accepted: a backlog replayed after an outage is old and true.
	// Zero means no bound.
	MaxPast time.Duration
}

// Skew counts the readings of a batch outside the window.
type Skew struct {
	// Future readings were removed from the batch.
	Future int
	// Past readings were kept.
	Past int
	// Ahead and Behind are the largest distances seen from the receive
	// time among them.
	Ahead, Behind time.Duration
}

// Any reports whether the batch had a reading outside the window.
func (s Skew) Any() bool { return s.Future > 0 || s.Past > 0 }

// Check classifies one reading time against the window at now: +1 when it
// is beyond MaxFuture, -1 when it is older than MaxPast, else 0.
func (w ClockWindow) Check(t, now time.Time) int {
	switch d := t.Sub(now); {
	case w.MaxFuture > 0 && d > w.MaxFuture:
		return 1
	case w.MaxPast > 0 && -d > w.MaxPast:
		return -1
	}
	return 0
}

// GuardClock removes from b the readings timed more than w.MaxFuture after
// now, counts those older than w.MaxPast (and keeps them), and drops the
// messages left without readings. A reading's time is its own timestamp,
// else its message's; a reading with neither is stored at its receive time
// and cannot be skewed.
func GuardClock(b *Batch, now time.Time, w ClockWindow) Skew {
	var s Skew
	kept := b.Messages[:0]
	for _, m := range b.Messages {
		rs := m.Readings[:0]
		for _, r := range m.Readings {
			ts := r.Timestamp
			if ts == nil {
				ts = m.Timestamp
			}
			if ts == nil {
				rs = append(rs, r)
				continue
			}
			switch w.Check(ts.Time, now) {
			case 1:
				s.Future++
				s.Ahead = max(s.Ahead, ts.Sub(now))
				continue
			case -1:
				s.Past++
				s.Behind = max(s.Behind, now.Sub(ts.Time))
			}
			rs = append(rs, r)
		}
		if len(rs) == 0 {
			continue
		}
		m.Readings = rs
		kept = append(kept, m)
	}
	// Clear the tail so dropped messages do not stay reachable.
	clear(b.Messages[len(kept):])
	b.Messages = kept
	return s
}
