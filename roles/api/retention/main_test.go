package retention

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind, such as a
// database pool that was never closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
