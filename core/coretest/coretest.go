// Package coretest holds helpers shared by tests: free ports, finders for
// the real services integration tests talk to, and private servers
// (PostgreSQL, Redis, Mosquitto) that outage tests stop and start without
// disturbing the shared ones. A finder skips the test when its service is
// absent locally, and fails it under CI=true or EDGEPLAT_REQUIRE_SERVICES=1,
// so a missing service can never turn a CI run green by skipping.
package coretest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. Tests
// must not assume 1883 and friends are free: real services run there.
//
// The port is drawn below Linux's ephemeral range (32768-60999 by
// default): a port the kernel hands out for ":0" is one it also hands to
// outgoing connections, and with many test packages dialling PostgreSQL
// and Redis at once, one of them took a port between FreePort and the
// server that was to listen on it. No port is handed out twice in one
// test binary.
func FreePort(t testing.TB) int {
	t.Helper()
	freePorts.Lock()
	defer freePorts.Unlock()
	for range 200 {
		p := freePortLow + rand.IntN(freePortHigh-freePortLow)
		if freePorts.given[p] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		freePorts.given[p] = true
		return p
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// The range FreePort draws from: above the registered services that run
// on test machines (PostgreSQL, Redis, brokers), below the ephemeral range.
const freePortLow, freePortHigh = 20000, 32000

var freePorts = struct {
	sync.Mutex
	given map[int]bool
}{given: map[int]bool{}}

// RequireServices reports whether missing services must fail tests.
func RequireServices() bool {
	if v, _ := strconv.ParseBool(os.Getenv("EDGEPLAT_REQUIRE_SERVICES")); v {
		return true
	}
	v, _ := strconv.ParseBool(os.Getenv("CI"))
	return v
}

// Unavailable skips the test, or fails it when services are required.
func Unavailable(t testing.TB, service, addr string, err error) {
	t.Helper()
	if RequireServices() {
		t.Fatalf("%s required (CI or EDGEPLAT_REQUIRE_SERVICES) but not reachable at %s: %v", service, addr, err)
	}
	t.Skipf("%s not reachable at %s (%v); skipping integration test", service, addr, err)
}

// Addr returns the value of env, or def when unset.
func Addr(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// Dialable reports whether a TCP connection to addr succeeds quickly.
func Dialable(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// Eventually polls cond every 10 ms until it returns true or timeout passes.
// It bounds waits for asynchronous effects; it never asserts speed.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// FreeUDPPort is a FreePort that is free for UDP on 127.0.0.1 as well,
// for a peer that listens on both or on UDP only (BACnet/IP).
func FreeUDPPort(t testing.TB) int {
	t.Helper()
	for range 20 {
		p := FreePort(t)
		if c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p}); err == nil {
			c.Close()
			return p
		}
	}
	t.Fatal("no free UDP port")
	return 0
}
