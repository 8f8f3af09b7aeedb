package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/rt"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newRuntime() *rt.Runtime {
	return &rt.Runtime{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Health: health.New(time.Second)}
}

// TestBrokerRoundTrip connects a real MQTT client (paho) to the embedded
// broker, subscribes and receives its own publish.
func TestBrokerRoundTrip(t *testing.T) {
	r := newRuntime()
	b, err := New(Options{Bind: "127.0.0.1", Port: 0}, r)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Stop(ctx)
	if rep := r.Health.Report(ctx); !rep.Healthy {
		t.Errorf("health = %+v, want healthy", rep)
	}

	opts := paho.NewClientOptions().AddBroker("tcp://" + b.Addr()).SetClientID("broker-test").SetConnectTimeout(5 * time.Second)
	c := paho.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	got := make(chan string, 1)
	if tok := c.Subscribe("i/+/a/+/endpoints/#", 1, func(_ paho.Client, m paho.Message) {
		got <- fmt.Sprintf("%s %s", m.Topic(), m.Payload())
	}); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	if tok := c.Publish("i/T/a/A/endpoints/modbus", 1, false, "hello"); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
	select {
	case m := <-got:
		if m != "i/T/a/A/endpoints/modbus hello" {
			t.Errorf("got %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no message delivered")
	}
}

func TestBrokerPortInUseNamesTheFlag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	b, err := New(Options{Bind: "127.0.0.1", Port: port, PortHint: "--mqtt-port"}, newRuntime())
	if err != nil {
		t.Fatal(err)
	}
	err = b.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "already in use; choose another port with --mqtt-port") {
		t.Fatalf("Start = %v, want a port-in-use error naming --mqtt-port", err)
	}
}

func TestNewValidates(t *testing.T) {
	for _, o := range []Options{{Bind: "nope", Port: 1}, {Bind: "127.0.0.1", Port: 70000}} {
		if _, err := New(o, newRuntime()); err == nil {
			t.Errorf("New(%+v) should fail", o)
		}
	}
}
