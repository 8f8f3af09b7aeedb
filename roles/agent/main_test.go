package agent

import (
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: every endpoint
// goroutine, adapter connection and batcher timer must end with the agent.
func TestMain(m *testing.M) {
	code := m.Run()
	// The tests' HTTP client keeps idle connections; they are not the
	// agent's.
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goroutines left behind: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
