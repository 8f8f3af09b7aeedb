//go:build unix

package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
)

// shell runs command with sh -c in a process group of its own, killed
// whole when ctx ends (cancel or timeout) and once sh exits, so nothing it
// started outlives the job. Its output goes to a temporary file, not a
// pipe: a background child holding the pipe open cannot keep the job
// from ending. The result is the first control.MaxJobResultBytes of
// stdout and stderr together.
func shell(ctx context.Context, command string) (outcome, error) {
	f, err := os.CreateTemp("", "edgeplat-job-*.out")
	if err != nil {
		return outcome{}, fmt.Errorf("shell output file: %w", err)
	}
	defer func() { _ = f.Close(); _ = os.Remove(f.Name()) }()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return outcome{}, fmt.Errorf("shell output: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, control.MaxJobResultBytes))
	if err != nil {
		return outcome{}, fmt.Errorf("shell output: %w", err)
	}
	out := outcome{result: string(b)}
	if cmd.ProcessState == nil {
		return out, fmt.Errorf("shell: %w", runErr)
	}
	code := cmd.ProcessState.ExitCode()
	out.exitData = map[string]any{"exitCode": code}
	var ee *exec.ExitError
	switch {
	case runErr == nil:
		return out, nil
	case errors.As(runErr, &ee):
		return out, fmt.Errorf("shell: exit code %d", code)
	default:
		return out, fmt.Errorf("shell: %w", runErr)
	}
}
