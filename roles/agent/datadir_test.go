package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
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

func TestIsAccessError(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&fs.PathError{Op: "mkdir", Path: "/x", Err: syscall.EACCES}, true},
		{&fs.PathError{Op: "chmod", Path: "/x", Err: syscall.EPERM}, true},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.EROFS}, true},
		{&fs.PathError{Op: "mkdir", Path: "/x", Err: syscall.ENOTDIR}, true},
		{fmt.Errorf("open agent store: %w", &fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}), true},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, false},
		{&fs.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, false},
		{errors.New("database is locked"), false},
	}
	for _, tt := range tests {
		if got := isAccessError(tt.err); got != tt.want {
			t.Errorf("isAccessError(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestUnusableDataDirEndsTheAgent: a data directory this process may not
// use stops the agent with one error naming the path and the setting,
// instead of retrying forever behind a live API. A file where the
// directory should be fails for root too.
func TestUnusableDataDirEndsTheAgent(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(file, "agent")
	err := runAgentOn(t, dataDir)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("the agent kept retrying an unusable data directory")
	}
	if err == nil {
		t.Fatal("Run returned nil, want the data directory's error")
	}
	for _, want := range []string{dataDir, "AGENT_DATA_DIR", "not a directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// TestStoreOfAnotherUserIsNamed: a store file this process may not write
// is an error naming the file, caught before SQLite's own message.
func TestStoreOfAnotherUserIsNamed(t *testing.T) {
	// A directory named like the store cannot be opened for writing, by
	// root either.
	err := checkDataDir(retriedDataDir(t))
	if err == nil || !strings.Contains(err.Error(), "agent.db") || !strings.Contains(err.Error(), "AGENT_DATA_DIR") {
		t.Fatalf("checkDataDir = %v, want an error naming agent.db-wal and AGENT_DATA_DIR", err)
	}
}

// retriedDataDir is a data directory whose config phase fails in a way
// that is retried: a directory where the store file should be.
func retriedDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "agent.db"), 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
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
