package coretest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RedisCluster is a private Redis Cluster of masters without replicas,
// each a redis-server child on loopback ports with its files in a
// temporary directory. The test's cleanup kills them.
type RedisCluster struct {
	nodes []*exec.Cmd
	addrs []string
}

// Addrs are the masters' host:port addresses, to use as seed nodes.
func (c *RedisCluster) Addrs() []string { return c.addrs }

// StartRedisCluster starts masters redis-server processes with
// cluster-enabled yes, joins them with redis-cli --cluster create (slots
// spread evenly, no replicas) and waits until every node reports
// cluster_state:ok. Without redis-server or redis-cli (Debian: redis-server
// and redis-tools) the test is skipped, or failed under CI.
func StartRedisCluster(t testing.TB, masters int) *RedisCluster {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			Unavailable(t, bin+" binary", "PATH", err)
		}
	}
	if masters < 3 {
		t.Fatalf("StartRedisCluster: Redis Cluster needs at least 3 masters, got %d", masters)
	}
	c := &RedisCluster{}
	t.Cleanup(c.kill)
	for i := range masters {
		// The cluster bus gets a port of its own: the default, port+10000,
		// would fall into the ephemeral range FreePort avoids.
		port, bus := FreePort(t), FreePort(t)
		dir := filepath.Join(t.TempDir(), "node"+strconv.Itoa(i))
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--cluster-node-timeout", "5000",
			"--dir", dir, "--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log"))
		cmd.SysProcAttr = serverProcAttr()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server (cluster node %d): %v", i, err)
		}
		c.nodes = append(c.nodes, cmd)
		c.addrs = append(c.addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	for _, a := range c.addrs {
		waitFor(t, 10*time.Second, "redis-server on "+a, func() error { return pingRedis(a) })
	}
	args := append([]string{"--cluster", "create"}, c.addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range c.addrs {
		waitFor(t, 30*time.Second, "cluster_state:ok on "+a, func() error { return clusterOK(a) })
	}
	return c
}

// CLI runs redis-cli against the node at addr (which must be one of the
// cluster's) with args and returns its trimmed output.
func (c *RedisCluster) CLI(t testing.TB, addr string, args ...string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func clusterOK(addr string) error {
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command("redis-cli", "-h", host, "-p", port, "cluster", "info").Output()
	if err != nil {
		return err
	}
	if !strings.Contains(string(out), "cluster_state:ok") {
		return fmt.Errorf("cluster not ready")
	}
	return nil
}

func waitFor(t testing.TB, timeout time.Duration, what string, ready func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *RedisCluster) kill() {
	for _, cmd := range c.nodes {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	}
	c.nodes = nil
}
