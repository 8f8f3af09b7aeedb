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
	opts RedisOptions
	cmd  *exec.Cmd
}

// RedisOptions shape a private Redis's persistence; the zero value is
// PrivateRedis's fsynced append-only file.
type RedisOptions struct {
	// AppendOnly "no" turns the append-only file off; "" is "yes".
	AppendOnly string
	// AppendFsync is "always" when empty; "everysec" is Redis's default
	// and the usual production setting.
	AppendFsync string
	// Save is the RDB save points ("" keeps none, as PrivateRedis does).
	Save string
	// Args are more redis-server arguments, such as "--rename-command",
	// "CONFIG", "".
	Args []string
}

// PrivateRedis starts redis-server on a free port with an fsynced
// append-only file, so data survives Stop and Start as on a production
// node. Without the binary the test is skipped, or failed under CI.
func PrivateRedis(t testing.TB) *RedisServer {
	t.Helper()
	return PrivateRedisWith(t, RedisOptions{})
}

// PrivateRedisWith is PrivateRedis with the persistence opts asks for.
func PrivateRedisWith(t testing.TB, opts RedisOptions) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		Unavailable(t, "redis-server binary", "PATH", err)
	}
	if opts.AppendOnly == "" {
		opts.AppendOnly = "yes"
	}
	if opts.AppendFsync == "" {
		opts.AppendFsync = "always"
	}
	s := &RedisServer{t: t, port: FreePort(t), dir: t.TempDir(), opts: opts}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Addr is host:port of the server.
func (s *RedisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Start starts the server and waits until it accepts connections.
func (s *RedisServer) Start() {
	s.t.Helper()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", s.opts.Save, "--appendonly", s.opts.AppendOnly, "--appendfsync", s.opts.AppendFsync, "--dir", s.dir}, s.opts.Args...)
	s.cmd = exec.Command("redis-server", args...)
	s.cmd.SysProcAttr = serverProcAttr()
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	// A server loading its append-only file answers PING with -LOADING,
	// which pingRedis counts as not ready.
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

// Kill ends the server with SIGKILL, as a crash would: what its
// persistence settings had not written yet is lost.
func (s *RedisServer) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_, _ = s.cmd.Process.Wait()
	s.cmd = nil
}
