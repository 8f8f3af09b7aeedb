package lifecycle

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends, whichever comes first, and reports
// whether the whole wait passed: false means ctx ended and the caller
// should stop. A d of zero or less does not wait.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
