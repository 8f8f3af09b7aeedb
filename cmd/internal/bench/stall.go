package bench

import (
	"fmt"
	"time"
)

// stallDetector tells a backlog that stopped moving from one that moves
// slowly. A broker that dropped messages it had acknowledged to the
// publishers (Mosquitto past max_queued_messages for the subscriber) leaves
// the bench waiting for rows that will never come: it once sat at 86 % for
// 8 minutes without a word.
type stallDetector struct {
	after    time.Duration // 0 never reports a stall
	progress float64
	since    time.Time
}

// observe records the progress counter's value at now and reports whether
// it has not moved for after.
func (d *stallDetector) observe(now time.Time, progress float64) bool {
	if d.since.IsZero() || progress != d.progress {
		d.progress, d.since = progress, now
		return false
	}
	return d.after > 0 && now.Sub(d.since) >= d.after
}

// stallError says what a stalled bench saw, the likely cause and the fix.
func stallError(after time.Duration, published int64, received, inserted float64, want int64, brokerDropped float64) error {
	cause := "the broker has most likely dropped messages it had acknowledged to the publishers"
	if brokerDropped > 0 {
		cause = fmt.Sprintf("the broker reported %.0f messages dropped ($SYS/broker/publish/messages/dropped)", brokerDropped)
	}
	return fmt.Errorf("stalled: nothing moved for %s with %.0f of %d rows committed (%d messages published, %.0f received by serve-api): %s. "+
		"Mosquitto drops QoS 1 messages past max_queued_messages (1000 by default) for a subscriber that falls behind; "+
		"raise max_queued_messages and max_inflight_messages in mosquitto.conf (docs/benchmarks.md, \"Broker settings for a Cloud API subscriber\"), "+
		"or pass --stall-after 0 to wait until --timeout",
		after, inserted, want, published, received, cause)
}
