package coretest

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// RedisAddr returns the address of the Redis that integration tests use:
// EDGEPLAT_TEST_REDIS_ADDR, or 127.0.0.1:6379. It skips the test (fails it
// when services are required) unless a PING there gets PONG. The check
// speaks RESP over a plain connection so that every test binary need not
// link a Redis client.
func RedisAddr(t testing.TB) string {
	t.Helper()
	addr := Addr("EDGEPLAT_TEST_REDIS_ADDR", "127.0.0.1:6379")
	if err := pingRedis(addr); err != nil {
		Unavailable(t, "Redis", addr, err)
	}
	return addr
}

func pingRedis(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read PING reply: %w", err)
	}
	if reply := strings.TrimSpace(line); reply != "+PONG" {
		return fmt.Errorf("PING answered %q", reply)
	}
	return nil
}
