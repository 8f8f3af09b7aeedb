package jobs

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: the loop, the
// worker and the heartbeat end with Run.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goroutines left behind: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
