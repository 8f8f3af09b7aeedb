package coretest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Process is a third-party peer a test runs as a child process (a Modbus
// or OPC-UA server) and may kill and start again to simulate an outage.
// Its output goes to a log file that failures print.
type Process struct {
	t    testing.TB
	name string
	args []string
	log  string
	// Ready reports whether the process serves; Start waits for it. Nil
	// means ready at once.
	Ready func() error
	// Env holds KEY=value pairs added to the test's environment for the
	// child (podman reads its configuration file from CONTAINERS_CONF).
	Env    []string
	cmd    *exec.Cmd
	waitCh chan error
}

// NewProcess prepares name with args; the test's cleanup kills it.
func NewProcess(t testing.TB, name string, args ...string) *Process {
	p := &Process{t: t, name: name, args: args, log: filepath.Join(t.TempDir(), filepath.Base(name)+".log")}
	t.Cleanup(p.Stop)
	return p
}

// Output is what the process has printed so far.
func (p *Process) Output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// Start runs the process and waits up to 30 s for Ready.
func (p *Process) Start() {
	p.t.Helper()
	logf, err := os.Create(p.log)
	if err != nil {
		p.t.Fatal(err)
	}
	defer logf.Close() // the child has its own descriptor
	p.cmd = exec.Command(p.name, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if len(p.Env) > 0 {
		p.cmd.Env = append(os.Environ(), p.Env...)
	}
	if err := p.cmd.Start(); err != nil {
		p.cmd = nil
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	p.waitCh = make(chan error, 1)
	go func(cmd *exec.Cmd, ch chan<- error) { ch <- cmd.Wait() }(p.cmd, p.waitCh)
	if p.Ready == nil {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.Ready() != nil {
		select {
		case err := <-p.waitCh:
			p.cmd = nil
			p.t.Fatalf("%s exited: %v\n%s", p.name, err, p.Output())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s not ready after 30s:\n%s", p.name, p.Output())
		}
	}
}

// Stop kills the process (an outage, not a shutdown) and reaps it.
func (p *Process) Stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.waitCh
	p.cmd = nil
}
