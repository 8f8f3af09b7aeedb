package coretest

import (
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// RedisServer is a private Redis server a test may stop and start, for
// outage tests that must not disturb the shared one.
type RedisServer struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
}

// PrivateRedis starts redis-server on a free port with an fsynced
// append-only file, so data survives Stop and Start as on a production
// node. Without the binary the test is skipped, or failed under CI.
func PrivateRedis(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		Unavailable(t, "redis-server binary", "PATH", err)
	}
	s := &RedisServer{t: t, port: FreePort(t), dir: t.TempDir()}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Addr is host:port of the server.
func (s *RedisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Start starts the server and waits until it accepts connections.
func (s *RedisServer) Start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--dir", s.dir)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for pingRedis(s.Addr()) != nil {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s did not answer", s.Addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop shuts the server down (SIGTERM; its append-only file keeps the data).
func (s *RedisServer) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _, _ = s.cmd.Process.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	s.cmd = nil
}
