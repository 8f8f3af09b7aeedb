package broker

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/rt"
)

// logBuffer collects log output written from the broker's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fakeClock is the rate limiter's clock, moved by the test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// startLoggedBroker starts the broker with the edgeplat auth hook and its
// log captured at level.
func startLoggedBroker(t *testing.T, level slog.Level, clock *fakeClock) (*Broker, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	r := &rt.Runtime{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: level})), Health: health.New(time.Second)}
	a, err := brokerauth.New(brokerauth.Options{
		Store:        &memStore{devices: map[string]string{deviceKey: devicePassword}},
		ServiceUsers: map[string]config.Secret{serviceUser: servicePassword},
		CacheTTL:     time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Bind: "127.0.0.1", Auth: a, now: clock.Now}, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	return b, logs
}

// TestRefusedPublishIsLoggedWithoutPayload publishes 2 MiB on a topic the
// device may not write, twice, then a third time after the rate limit's
// interval. mochi logged each refused packet whole: 5 MiB of log per
// publish.
func TestRefusedPublishIsLoggedWithoutPayload(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	b, logs := startLoggedBroker(t, slog.LevelInfo, clock)
	forbidden := topicOf(t, tenantUUID, otherAgentUUID, "endpoints/modbus")
	payload := bytes.Repeat([]byte{'7'}, 2<<20)
	refuse := func() {
		t.Helper()
		c, err := dial(b.Addr(), deviceKey, devicePassword, deviceClientID, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Disconnect(100)
		// MQTT 3.1.1 has no negative PUBACK: the broker ends the connection.
		c.Publish(forbidden, 1, false, payload)
		select {
		case <-c.lost:
		case <-time.After(wait):
			t.Fatal("the refused publish did not end the connection")
		}
		// mochi logs the refusal after closing the connection; the client
		// count drops once it has.
		coretest.Eventually(t, wait, "the broker is done with the client", func() bool {
			return atomic.LoadInt64(&b.server.Info.ClientsConnected) == 0
		})
	}
	refuse()
	refuse()
	coretest.Eventually(t, wait, "the refusal is logged", func() bool {
		out := logs.String()
		return strings.Contains(out, "mqtt packet refused") || strings.Contains(out, "error processing packet")
	})
	out := logs.String()
	if len(out) > 4<<10 {
		t.Fatalf("two refused 2 MiB publishes wrote %d bytes of log:\n%.2000s", len(out), out)
	}
	for _, want := range []string{"client=" + deviceClientID, "topic=" + forbidden, "bytes=2097152", `reason="not authorized"`, "type=Publish"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "mqtt packet refused"); n != 1 {
		t.Errorf("%d refusal lines within the interval, want 1:\n%s", n, out)
	}
	if strings.Contains(out, "7777") {
		t.Errorf("log carries the payload:\n%.2000s", out)
	}

	clock.Advance(logEvery)
	refuse()
	coretest.Eventually(t, wait, "the next refusal is logged with the suppressed count", func() bool {
		return strings.Count(logs.String(), "mqtt packet refused") == 2
	})
	if out := logs.String(); !strings.Contains(out, "suppressed=1") {
		t.Errorf("the line after the interval does not count the suppressed one:\n%s", out)
	}
}

// TestStopLogsNoWarning stops the broker with clients connected. mochi's
// listener logged a WARN with an empty message for each of them.
func TestStopLogsNoWarning(t *testing.T) {
	b, logs := startLoggedBroker(t, slog.LevelInfo, &fakeClock{now: time.Unix(1_700_000_000, 0)})
	for _, id := range []string{deviceClientID, "edgeplat-api-test"} {
		user, pass := deviceKey, devicePassword
		if id != deviceClientID {
			user, pass = serviceUser, servicePassword
		}
		c, err := dial(b.Addr(), user, pass, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Disconnect(0)
	}
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.Contains(line, `msg=""`) {
			t.Errorf("stop logged %q", line)
		}
	}
}
