//go:build linux

package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
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

// runAgentOn runs the agent role on dataDir until it ends, for at most
// 20 s.
func runAgentOn(t *testing.T, dataDir string) error {
	cfg := &config.Config{}
	cfg.Agent = config.Agent{Port: coretest.FreePort(t), SecurityMode: "LOCALHOST_ONLY", DataDir: dataDir}
	r := &rt.Runtime{Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
	svcs, err := New(cfg, r, Options{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = lifecycle.Run(ctx, lifecycle.Options{GracePeriod: 5 * time.Second}, svcs...)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

func errString(err error) string {
	switch {
	case err == nil:
		return "no error"
	case errors.Is(err, context.DeadlineExceeded):
		return "still running after 20 s"
	}
	return err.Error()
}
