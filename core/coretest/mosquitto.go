package coretest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// MosquittoServer is a private Mosquitto broker a test may stop, kill and
// start again on the same port, for outage tests that must not disturb the
// shared broker other tests use.
type MosquittoServer struct {
	t      testing.TB
	bin    string
	port   int
	dir    string
	extra  string // more mosquitto.conf lines
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// PrivateMosquitto starts the mosquitto binary (from PATH, or /usr/sbin,
// where Debian puts it) on a free 127.0.0.1 port with anonymous access and
// persistence in a temporary directory, and stops it when the test ends.
// Like MQTTAddr it skips the test in -short mode; without the binary the
// test is skipped, or failed under CI.
//
// The broker persists as a production one does, but only on a clean exit
// (autosave_interval 0): after Stop, sessions, subscriptions and messages
// queued for offline clients come back with Start; after Kill they are lost,
// unless an earlier Stop saved them. max_queued_messages is large, so a
// persistent session does not drop a test's backlog while its client is
// away.
func PrivateMosquitto(t testing.TB) *MosquittoServer {
	t.Helper()
	return PrivateMosquittoWith(t, "")
}

// PrivateMosquittoWith is PrivateMosquitto with more mosquitto.conf lines
// after the defaults, which they override (Mosquitto keeps the last value
// of a setting): "max_queued_messages 10\nsys_interval 1\n", say.
func PrivateMosquittoWith(t testing.TB, conf string) *MosquittoServer {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs Mosquitto, skipped in -short mode")
	}
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		// /usr/sbin is missing from many users' PATH.
		if _, serr := os.Stat("/usr/sbin/mosquitto"); serr != nil {
			Unavailable(t, "mosquitto binary", "PATH or /usr/sbin", err)
		}
		bin = "/usr/sbin/mosquitto"
	}
	s := &MosquittoServer{t: t, bin: bin, port: FreePort(t), dir: t.TempDir(), extra: conf}
	if err := s.writeConfig(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			s.logTail()
		}
	})
	s.Start()
	return s
}

func (s *MosquittoServer) writeConfig() error {
	conf := fmt.Sprintf(`listener %d 127.0.0.1
allow_anonymous true
persistence true
persistence_location %s/
autosave_interval 0
max_queued_messages 100000
set_tcp_nodelay true
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
`, s.port, s.dir)
	// set_tcp_nodelay: without it Mosquitto's small PUBACKs wait for the
	// client's delayed ACK (Nagle), about 40 ms per burst of publishes,
	// which made a 10,000-record replay ten times slower. Production
	// brokers carrying agent traffic want it too (docs/agent.md).
	// Run as root, mosquitto switches to the mosquitto user, which cannot
	// write to a root-owned temporary directory.
	if os.Geteuid() == 0 {
		conf += "user root\n"
	}
	conf += s.extra
	return os.WriteFile(s.confPath(), []byte(conf), 0o600)
}

func (s *MosquittoServer) confPath() string { return filepath.Join(s.dir, "mosquitto.conf") }
func (s *MosquittoServer) logPath() string  { return filepath.Join(s.dir, "mosquitto.log") }

// Addr is host:port of the broker.
func (s *MosquittoServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the broker URL for an MQTT client (tcp://host:port).
func (s *MosquittoServer) URL() string { return "tcp://" + s.Addr() }

// Start starts the broker on its port and waits until it accepts an MQTT
// CONNECT. Starting a running broker is a test bug.
func (s *MosquittoServer) Start() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatal("mosquitto Start called while it runs")
	}
	// One log over restarts, so a failure shows the whole story.
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(s.bin, "-c", s.confPath())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = serverProcAttr()
	err = cmd.Start()
	_ = logf.Close() // the child has its own descriptor
	if err != nil {
		s.t.Fatalf("start mosquitto: %v", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(s.exited)

	deadline := time.Now().Add(10 * time.Second)
	for {
		err := pingMQTT(s.Addr())
		if err == nil {
			return
		}
		select {
		case <-s.exited:
			s.cmd = nil
			s.t.Fatalf("mosquitto on %s exited at start (%v):\n%s", s.Addr(), cmd.ProcessState, s.readLog())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("mosquitto on %s did not accept a CONNECT: %v\n%s", s.Addr(), err, s.readLog())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop shuts the broker down cleanly (SIGTERM): it closes every client
// connection and saves its sessions for the next Start. Stopping a stopped
// broker does nothing.
func (s *MosquittoServer) Stop() { s.signal(syscall.SIGTERM) }

// Kill ends the broker with SIGKILL, as a crash of its host would: client
// connections break and nothing since the last Stop is saved.
func (s *MosquittoServer) Kill() { s.signal(syscall.SIGKILL) }

func (s *MosquittoServer) signal(sig os.Signal) {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		s.t.Errorf("mosquitto on %s ignored %v for 10 s and was killed", s.Addr(), sig)
	}
	s.cmd = nil
}

func (s *MosquittoServer) readLog() string {
	b, err := os.ReadFile(s.logPath())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return string(b)
}

// logTail shows the end of the broker's log in a failed test's output.
func (s *MosquittoServer) logTail() {
	b := []byte(s.readLog())
	const limit = 8 << 10
	if len(b) > limit {
		b = b[len(b)-limit:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	s.t.Logf("mosquitto log (%s):\n%s", s.logPath(), bytes.TrimSpace(b))
}
