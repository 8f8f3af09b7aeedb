package mqttx

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// TestSendAcknowledged: every message Send reports delivered reached a
// subscriber, in order; without a connection nothing is written.
func TestSendAcknowledged(t *testing.T) {
	tb := startBroker(t, 0)
	topic := uniqueID("send")
	c := newClient(t, testOptions(t, tb.url()))
	in := newInbox()
	if err := c.Subscribe(topic, 1, in.handler(nil)); err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitState(t, c, StateConnected)

	msgs := make([]Outgoing, 50)
	for i := range msgs {
		msgs[i] = Outgoing{Topic: topic, QoS: 1, Payload: fmt.Appendf(nil, "m%02d", i)}
	}
	msgs = append(msgs, Outgoing{Topic: "bad/+/topic", QoS: 1}, Outgoing{Topic: topic, QoS: 3})
	errs := c.Send(t.Context(), msgs)
	for i, err := range errs[:50] {
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if errs[50] == nil || errs[51] == nil {
		t.Fatalf("invalid topic and qos accepted: %v %v", errs[50], errs[51])
	}
	got := in.waitCount(t, 50)
	for i, p := range got {
		if want := fmt.Sprintf("m%02d", i); p != want {
			t.Fatalf("message %d = %q, want %q", i, p, want)
		}
	}

	tb.stop()
	waitNotConnected(t, c)
	for _, err := range c.Send(t.Context(), msgs[:3]) {
		if !errors.Is(err, ErrNotConnected) {
			t.Fatalf("send while down: %v, want ErrNotConnected", err)
		}
	}
	if n := c.Stats().QueueLength; n != 0 {
		t.Fatalf("Send queued %d messages", n)
	}
	stop()
	for _, err := range c.Send(t.Context(), msgs[:1]) {
		if !errors.Is(err, ErrStopped) {
			t.Fatalf("send after stop: %v, want ErrStopped", err)
		}
	}
}

// TestSendNotAcknowledged: a broker that takes PUBLISH packets and never
// answers, or drops the connection after reading them, gets no message
// counted as delivered, and the client reconnects.
func TestSendNotAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hangUp   bool
		ackAfter time.Duration
	}{
		{name: "silent", ackAfter: 300 * time.Millisecond},
		{name: "hang-up", hangUp: true, ackAfter: 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, accepted := mutedBroker(t, tc.hangUp)
			o := testOptions(t, "tcp://"+addr)
			o.AckTimeout = tc.ackAfter
			c := newClient(t, o)
			start(t, c)
			waitState(t, c, StateConnected)
			msgs := []Outgoing{{Topic: "a/b", QoS: 1, Payload: []byte("x")}, {Topic: "a/b", QoS: 1, Payload: []byte("y")}}
			for i, err := range c.Send(t.Context(), msgs) {
				if !errors.Is(err, ErrNotDelivered) {
					t.Fatalf("message %d: %v, want ErrNotDelivered", i, err)
				}
			}
			select {
			case <-accepted:
			case <-time.After(10 * time.Second):
				t.Fatal("the client did not reconnect")
			}
		})
	}
}

// mutedBroker accepts MQTT connections, answers CONNECT with a CONNACK
// and PINGREQ with a PINGRESP, and never acknowledges a PUBLISH; with
// hangUp it closes the connection when one arrives. accepted receives on
// every connection after the first.
func mutedBroker(t *testing.T, hangUp bool) (addr string, accepted <-chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n := 0
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			if n++; n > 1 {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
			go func() {
				<-ctx.Done()
				_ = nc.Close()
			}()
			go serveMuted(nc, hangUp)
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = ln.Close()
		<-done
	})
	return ln.Addr().String(), ch
}

func serveMuted(nc net.Conn, hangUp bool) {
	defer nc.Close()
	r := bufio.NewReader(nc)
	for {
		head, err := r.ReadByte()
		if err != nil {
			return
		}
		var size, mult int = 0, 1
		for {
			b, err := r.ReadByte()
			if err != nil {
				return
			}
			size += int(b&0x7f) * mult
			if b&0x80 == 0 {
				break
			}
			mult *= 128
		}
		if _, err := io.CopyN(io.Discard, r, int64(size)); err != nil {
			return
		}
		switch head >> 4 {
		case 1: // CONNECT
			_, _ = nc.Write([]byte{0x20, 2, 0, 0})
		case 12: // PINGREQ
			_, _ = nc.Write([]byte{0xd0, 0})
		case 3: // PUBLISH
			if hangUp {
				return
			}
		}
	}
}

func waitNotConnected(t *testing.T, c *Client) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c.State() == StateConnected; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("client still connected")
		}
	}
}
