package store

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// killEnv names the variable that tells a re-run test binary it is the
// child of a kill test, and which data directory to write.
const killEnv = "EDGEPLAT_STORE_KILL_CHILD"

// killChildDir returns the data directory when this process is the child
// of the kill test named test, else "".
func killChildDir(test string) string {
	v := os.Getenv(killEnv)
	if v == "" || os.Getenv(killEnv+"_TEST") != test {
		return ""
	}
	return v
}

// runAndKill re-runs the test binary as the child of the kill test named
// test, which writes to dir and prints a growing count after each commit;
// once it has printed at least n, it is killed with SIGKILL. It returns
// the last count the child printed: everything up to it was committed.
func runAndKill(t *testing.T, test, dir string, n uint64) uint64 {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), killEnv+"="+dir, killEnv+"_TEST="+test)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var last uint64
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, err := strconv.ParseUint(sc.Text(), 10, 64); err == nil {
			if last = v; v >= n {
				break
			}
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if last < n {
		t.Fatalf("the child reported only %d commits, want at least %d", last, n)
	}
	return last
}
