package cmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestAgentUnusableDataDirExits: the agent exits 1 with the data
// directory's error instead of retrying it forever with its API up.
func TestAgentUnusableDataDirExits(t *testing.T) {
	clearEnv(t)
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(file, "agent")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := execute(ctx, []string{"agent", "--data-dir", dataDir, "--port", strconv.Itoa(coretest.FreePort(t)), "--log-format", "text"}, &out, &errb)
	if ctx.Err() != nil {
		t.Fatalf("the agent was still running after 30 s:\n%s", errb.String())
	}
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	var lines []string
	for _, l := range strings.Split(errb.String(), "\n") {
		if strings.Contains(l, "level=ERROR") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], dataDir) || !strings.Contains(lines[0], "AGENT_DATA_DIR") {
		t.Fatalf("want one error line naming %s and AGENT_DATA_DIR, got %q\n%s", dataDir, lines, errb.String())
	}
}
