//go:build linux

package agent

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// nobody is the uid and gid the permission test runs the agent as when
// the tests run as root, which no permission bit stops.
const nobody = 65534

// TestPermissionDeniedEndsTheAgent (issue 16 item 18): an agent that may
// not write its data directory (a real EACCES, as for an agent run as a
// service user over a root-owned directory) exits with the error naming
// the path and AGENT_DATA_DIR, instead of retrying with its API up. As
// root, the test binary is run again as nobody.
func TestPermissionDeniedEndsTheAgent(t *testing.T) {
	if dir := os.Getenv("EDGEPLAT_TEST_DENIED_DIR"); dir != "" {
		// The re-executed child: no deferred cleanups of the parent.
		err := runAgentOn(t, dir)
		_, _ = io.WriteString(os.Stdout, "RESULT: "+errString(err)+"\n")
		os.Exit(0)
	}
	base, err := os.MkdirTemp("", "edgeplat-denied-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	locked := filepath.Join(base, "locked")
	if err := os.Mkdir(locked, 0o500); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(locked, "agent")
	var out string
	if os.Geteuid() != 0 {
		out = errString(runAgentOn(t, dataDir))
	} else {
		// base is 0700 root's: open it to the child, and give it a copy
		// of the test binary it can execute.
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(base, "agent.test")
		data, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-test.run=^TestPermissionDeniedEndsTheAgent$", "-test.count=1")
		cmd.Env = append(os.Environ(), "EDGEPLAT_TEST_DENIED_DIR="+dataDir, "HOME="+base)
		cmd.Dir = base
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child as uid %d: %v\n%s", nobody, err, b)
		}
		out = string(b)
	}
	for _, want := range []string{dataDir, "AGENT_DATA_DIR", "permission denied"} {
		if !strings.Contains(out, want) {
			t.Errorf("the agent's error does not name %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "still running") {
		t.Errorf("the agent kept retrying:\n%s", out)
	}
}
