package broker

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
)

// startBroker starts an anonymous broker with opts on a free port.
func startBroker(t *testing.T, opts Options) *Broker {
	t.Helper()
	opts.Bind, opts.Port = "127.0.0.1", 0
	b, err := New(opts, newRuntime())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	return b
}

// remainingLength encodes n as MQTT's variable-length integer.
func remainingLength(n int) []byte {
	var out []byte
	for {
		b := byte(n % 128)
		n /= 128
		if n > 0 {
			b |= 0x80
		}
		out = append(out, b)
		if n == 0 {
			return out
		}
	}
}

// closedByPeer reads from c until the broker closes it, and fails when it
// stays open for wait: a read timeout means the broker is still waiting for
// (and holding) the rest of the packet.
func closedByPeer(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 512)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s: the broker kept the connection open", what)
		}
		return // EOF or reset: closed by the broker
	}
}

// heapInUse is the test process's (and so the embedded broker's) heap.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestOversizedPacketBeforeConnectIsRefused sends packet headers that
// announce more than the broker takes, before any CONNECT, and checks the
// broker closes the connection without buffering what was announced.
// Without limits mochi allocated the whole announced size at once (and
// then waited for it).
func TestOversizedPacketBeforeConnectIsRefused(t *testing.T) {
	b := startBroker(t, Options{})
	const announced = 100 << 20
	for _, tc := range []struct {
		name      string
		typeByte  byte
		remaining int
	}{
		{"CONNECT of 100 MiB", 0x10, announced},
		// Under the packet limit, over what a CONNECT needs.
		{"CONNECT of 1 MiB", 0x10, 1 << 20},
		{"PUBLISH of 100 MiB as first packet", 0x30, announced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := heapInUse()
			c, err := net.Dial("tcp", b.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			hdr := append([]byte{tc.typeByte}, remainingLength(tc.remaining)...)
			if _, err := c.Write(hdr); err != nil {
				t.Fatal(err)
			}
			// Some of the body, which a broker that accepted the header
			// would now be reading into its buffer.
			_, _ = c.Write(make([]byte, 256<<10))
			closedByPeer(t, c, tc.name)
			if grew := int64(heapInUse()) - int64(before); grew > 8<<20 {
				t.Errorf("heap grew by %d bytes for a packet announcing %d", grew, tc.remaining)
			}
		})
	}
}

// TestSilentConnectionIsClosedAfterConnectTimeout opens a TCP connection
// that never sends CONNECT. mochi alone never closed it.
func TestSilentConnectionIsClosedAfterConnectTimeout(t *testing.T) {
	b := startBroker(t, Options{Limits: Limits{ConnectTimeout: 300 * time.Millisecond}})
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	closedByPeer(t, c, "silent connection")

	// A client that connects in time keeps its connection past the
	// timeout: from CONNECT on its keep-alive counts.
	pc := mustDial(t, b.Addr(), "", "", "in-time")
	time.Sleep(600 * time.Millisecond)
	if !pc.IsConnectionOpen() {
		t.Fatal("a connected client was closed by the connect timeout")
	}
	if tok := pc.Publish("t/x", 1, false, "ok"); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("publish after the connect timeout: %v", tok.Error())
	}
}

// TestLargestTelemetryPayloadPassesAndLargerIsRefused checks the default
// packet limit against the API's payload limit: a payload of exactly
// codec.DefaultMaxInputSize on a long topic is delivered, a larger packet
// than the limit ends the publisher's connection.
func TestLargestTelemetryPayloadPassesAndLargerIsRefused(t *testing.T) {
	b := startBroker(t, Options{})
	topic := "i/" + string(bytes.Repeat([]byte("t"), 1000)) + "/a/x/endpoints/modbus"
	sub := mustDial(t, b.Addr(), "", "", "sub")
	got := make(chan int, 2)
	if tok := sub.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) { got <- len(m.Payload()) }); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	pub, err := dial(b.Addr(), "", "", "pub", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Disconnect(100)
	if tok := pub.Publish(topic, 1, false, make([]byte, codec.DefaultMaxInputSize)); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("publish of the largest payload: %v", tok.Error())
	}
	select {
	case n := <-got:
		if n != codec.DefaultMaxInputSize {
			t.Fatalf("delivered %d bytes, want %d", n, codec.DefaultMaxInputSize)
		}
	case <-time.After(wait):
		t.Fatal("the largest telemetry payload was not delivered")
	}
	pub.Publish(topic, 0, false, make([]byte, DefaultMaxPacketBytes))
	select {
	case <-pub.lost:
	case <-time.After(wait):
		t.Fatal("a packet over the limit did not end the connection")
	}
	select {
	case n := <-got:
		t.Fatalf("a packet over the limit was delivered (%d bytes)", n)
	default:
	}
}

// TestConfigDefaultsAreTheBrokerDefaults keeps the all_in_one.mqtt_* key
// defaults (config cannot import the broker) equal to DefaultLimits, and
// the packet limit above the API's payload limit.
func TestConfigDefaultsAreTheBrokerDefaults(t *testing.T) {
	// The defaults are what is compared: a setting from the environment
	// is put aside for the test.
	for _, e := range os.Environ() {
		if k, _, _ := strings.Cut(e, "="); strings.HasPrefix(k, "EDGEPLAT_ALL_IN_ONE_MQTT_") {
			t.Setenv(k, "") // restores the value when the test ends
			if err := os.Unsetenv(k); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAllInOne})
	if err != nil {
		t.Fatal(err)
	}
	if got := LimitsFromConfig(cfg.AllInOne); got != DefaultLimits {
		t.Errorf("config defaults %+v, broker defaults %+v", got, DefaultLimits)
	}
	// A PUBLISH holds the payload, a topic of up to 64 KiB with its length,
	// a packet id and properties.
	if min := codec.DefaultMaxInputSize + 65535 + 2 + 2 + 1024; DefaultMaxPacketBytes < min {
		t.Errorf("DefaultMaxPacketBytes %d is under the largest telemetry PUBLISH, %d", DefaultMaxPacketBytes, min)
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Limits
		ok   bool
	}{
		{"zero takes defaults", Limits{}, true},
		{"packet under a CONNECT", Limits{MaxPacketBytes: 100}, false},
		{"receive maximum over uint16", Limits{ReceiveMaximum: 70000}, false},
		{"inflight over uint16", Limits{MaxInflight: 70000}, false},
		{"negative timeout", Limits{ConnectTimeout: -time.Second}, false},
		{"negative queue", Limits{MaxQueued: -1}, false},
		{"all set", Limits{MaxPacketBytes: 1 << 20, ConnectTimeout: time.Second, ReceiveMaximum: 10, MaxInflight: 10, MaxQueued: 10, SessionExpiry: time.Hour}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Options{Bind: "127.0.0.1", Limits: tc.l}, newRuntime())
			if (err == nil) != tc.ok {
				t.Fatalf("New = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
